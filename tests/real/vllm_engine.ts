/**
 * One real `vllm serve` (vLLM's CPU build, tests/real/setup.sh) on 127.0.0.1 serving the tiny Qwen3:
 * prefix caching on, prompt-token details in usage, KV events published to a ZMQ endpoint the
 * test binds, optionally the MooncakeStoreConnector writing its KV into a real mooncake_master.
 */
import { freePort, REAL, requireRealPrograms, waitForOk } from "./real_env.ts";
import { type RealProcess, startRealProcess } from "./real_process.ts";

export interface VllmOptions {
  /** PYTHONHASHSEED; absent: vLLM's default root ("vllm-none-hash" for sha256 chains). */
  seed?: string;
  /** `--prefix-caching-hash-algo` (default vLLM's, sha256). */
  hashAlgo?: "sha256" | "sha256_cbor" | "xxhash" | "xxhash_cbor";
  /**
   * The engine's KV-event PUB endpoint: a `tcp://127.0.0.1:...` one it connects to (a test's
   * subscriber binds it), an `ipc://...` one it binds (the router's feed connects to it).
   */
  kvEventsEndpoint?: string;
  /** Its replay ROUTER endpoint (`replay_endpoint`, bound by the engine). */
  kvEventsReplayEndpoint?: string;
  /** The master's RPC address: the engine writes its KV there (MooncakeStoreConnector). */
  mooncakeMaster?: string;
  /**
   * The address its store segment is published under (the host of the master's
   * `transport_endpoint_`, the router's `kvHost`): engines on one machine each take their own
   * loopback address (127.0.0.2, 127.0.0.3, ...) so the router can tell their segments apart.
   */
  kvHost?: string;
  /** The model directory; default REAL.model (served as REAL.modelName either way). */
  model?: string;
  /** Extra `vllm serve` arguments. */
  args?: string[];
  /** Extra environment variables. */
  env?: Record<string, string>;
  /** `--kv-transfer-config` (a P/D connector); `mooncakeMaster` sets the store connector's. */
  kvTransfer?: Record<string, unknown>;
  /**
   * The CPUs the engine's processes may run on (`taskset -c`, e.g. "1"): engines on this machine
   * otherwise share every core, where a cluster's instances each have their own device.
   */
  cpus?: string;
  /** Milliseconds to wait for /health (three engines starting at once on two cores: minutes). */
  startTimeoutMs?: number;
}

export interface VllmEngine {
  readonly url: string;
  readonly port: number;
  /** The model directory it serves (its path is part of the store's keys). */
  readonly model: string;
  readonly process: RealProcess;
  /** Where it publishes its KV events (a router's `kvEvents`), when it does. */
  readonly kvEvents?: { endpoint: string; replayEndpoint?: string };
  stop(): Promise<void>;
}

/** KV-event endpoints on this machine only: the PUB socket on a Unix socket (vLLM binds ipc://). */
export async function kvEventEndpoints(): Promise<{ pub: string; replay: string }> {
  const dir = await Deno.makeTempDir({ prefix: "tidegate-kv-events-" });
  return { pub: `ipc://${dir}/pub.sock`, replay: `tcp://127.0.0.1:${freePort()}` };
}

/** The KV block size on the CPU build: its attention takes multiples of 32; 128 is its default. */
export const CPU_BLOCK_SIZE = 128;

export async function startVllm(options: VllmOptions = {}): Promise<VllmEngine> {
  requireRealPrograms();
  const port = freePort();
  const model = options.model ?? REAL.model;
  const args = [
    "-m",
    "vllm.entrypoints.openai.api_server",
    "--model",
    model,
    "--served-model-name",
    REAL.modelName,
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--enable-prefix-caching",
    "--enable-prompt-tokens-details",
    "--block-size",
    String(CPU_BLOCK_SIZE),
    "--max-model-len",
    "8192",
    "--enforce-eager",
    "--dtype",
    "bfloat16",
    // Tool requests as a tool-serving deployment takes them (Qwen3's calls are Hermes-style).
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
    ...(options.hashAlgo ? ["--prefix-caching-hash-algo", options.hashAlgo] : []),
    ...(options.kvEventsEndpoint ? ["--kv-events-config", kvEventsConfig(options)] : []),
    ...(options.kvTransfer ? ["--kv-transfer-config", JSON.stringify(options.kvTransfer)] : []),
    ...(options.mooncakeMaster ? ["--kv-transfer-config", storeConnectorConfig()] : []),
    ...(options.args ?? []),
  ];
  const env: Record<string, string> = {
    VLLM_CPU_KVCACHE_SPACE: "1",
    VLLM_CPU_OMP_THREADS_BIND: "nobind",
    VLLM_SERVER_DEV_MODE: "1", // POST /reset_prefix_cache, to empty an engine between cases
    HF_HUB_OFFLINE: "1",
    VLLM_NO_USAGE_STATS: "1",
    VLLM_DO_NOT_TRACK: "1",
  };
  if (options.seed !== undefined) env.PYTHONHASHSEED = options.seed;
  Object.assign(env, options.env);
  if (options.mooncakeMaster) {
    // The store client publishes its segment under VLLM_HOST_IP (else the machine's outbound
    // address), not the config file's local_hostname: this override names the engine's kvHost.
    env.MOONCAKE_REQUESTER_LOCAL_HOSTNAME = options.kvHost ?? "127.0.0.1";
    env.MOONCAKE_CONFIG_PATH = await mooncakeConfigFile(
      options.mooncakeMaster,
      options.kvHost ?? "127.0.0.1",
    );
  }
  const process = options.cpus === undefined
    ? startRealProcess(`vllm-${port}`, REAL.python, args, env)
    : startRealProcess(`vllm-${port}`, "taskset", ["-c", options.cpus, REAL.python, ...args], env);
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForOk(`${url}/health`, options.startTimeoutMs ?? 300_000, process.alive, "vllm");
  } catch (error) {
    const tail = process.logTail(60);
    await process.stop();
    throw new Error(`${(error as Error).message}\n--- vllm log (${process.logPath}) ---\n${tail}`);
  }
  const kvEvents = options.kvEventsEndpoint
    ? { endpoint: options.kvEventsEndpoint, replayEndpoint: options.kvEventsReplayEndpoint }
    : undefined;
  return { url, port, model, process, kvEvents, stop: () => process.stop() };
}

function kvEventsConfig(options: VllmOptions): string {
  return JSON.stringify({
    enable_kv_cache_events: true,
    publisher: "zmq",
    // Without `*` vLLM connects to this endpoint rather than binding it: nothing listens beyond
    // loopback.
    endpoint: options.kvEventsEndpoint,
    ...(options.kvEventsReplayEndpoint ? { replay_endpoint: options.kvEventsReplayEndpoint } : {}),
    topic: "",
  });
}

function storeConnectorConfig(): string {
  return JSON.stringify({ kv_connector: "MooncakeStoreConnector", kv_role: "kv_both" });
}

/** The MooncakeStoreConnector's config file: the master, TCP transfers, small segments. */
async function mooncakeConfigFile(master: string, kvHost: string): Promise<string> {
  const path = await Deno.makeTempFile({ prefix: "tidegate-mooncake-", suffix: ".json" });
  await Deno.writeTextFile(
    path,
    JSON.stringify({
      metadata_server: "P2PHANDSHAKE",
      master_server_address: master,
      protocol: "tcp",
      device_name: "",
      local_hostname: kvHost,
      mode: "embedded",
      global_segment_size: "256MB",
      local_buffer_size: "128MB",
    }),
  );
  return path;
}

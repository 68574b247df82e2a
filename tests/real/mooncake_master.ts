/**
 * The real `mooncake_master` (from the mooncake transfer-engine wheel, tests/real/setup.sh) on
 * 127.0.0.1, and real store clients that fill it as engines on given hosts would
 * (tests/real/store_client.py).
 */
import { freePort, REAL, requireRealPrograms, waitForOk } from "./real_env.ts";
import { type RealProcess, startRealProcess } from "./real_process.ts";

export interface RealMaster {
  /** The HTTP admin port (`--metrics_port`): the router's `kv.url`. */
  readonly url: string;
  /** The RPC address store clients and engines connect to. */
  readonly rpcAddress: string;
  readonly process: RealProcess;
  /** Stops and starts it again on the same ports (an empty store). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** `args`: more `mooncake_master` flags (e.g. its KV event publisher). */
export async function startRealMaster(options: { args?: string[] } = {}): Promise<RealMaster> {
  requireRealPrograms();
  const rpcPort = freePort();
  const httpPort = freePort();
  const url = `http://127.0.0.1:${httpPort}`;
  const args = [
    "--rpc_address=127.0.0.1",
    `--rpc_port=${rpcPort}`,
    "--metrics_host=127.0.0.1",
    `--metrics_port=${httpPort}`,
    "--enable_http_metadata_server=false",
    // A client's put lands in its own segment: the master then reports each engine's KV under
    // that engine's host, which is what the router reads (with the default, `random`, a put
    // lands in any mounted segment).
    "--allocation_strategy=local_first",
    ...(options.args ?? []),
  ];
  const launch = async () => {
    const process = startRealProcess(`mooncake-master-${httpPort}`, REAL.mooncakeMaster, args);
    try {
      await waitForOk(`${url}/health`, 30_000, process.alive, "mooncake_master");
    } catch (error) {
      const tail = process.logTail();
      await process.stop();
      throw new Error(`${(error as Error).message}\n--- mooncake_master log ---\n${tail}`);
    }
    return process;
  };
  let process = await launch();
  return {
    url,
    rpcAddress: `127.0.0.1:${rpcPort}`,
    get process() {
      return process;
    },
    async restart() {
      await process.stop();
      process = await launch();
    },
    stop: () => process.stop(),
  };
}

/** A real store client publishing its segment under `host`: what it puts, the master says `host` holds. */
export interface StoreClient {
  put(keys: string[]): Promise<void>;
  remove(keys: string[]): Promise<void>;
  close(): Promise<void>;
}

export async function startStoreClient(host: string, master: RealMaster): Promise<StoreClient> {
  requireRealPrograms();
  const child = new Deno.Command(REAL.python, {
    args: [new URL("./store_client.py", import.meta.url).pathname, host, master.rpcAddress],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const writer = child.stdin.getWriter();
  let buffered = "";
  const nextLine = async (): Promise<Record<string, unknown>> => {
    const deadline = setTimeout(() => child.kill("SIGKILL"), 60_000);
    try {
      while (!buffered.includes("\n")) {
        const { value, done } = await lines.read();
        if (done) throw new Error(`store client for ${host} exited`);
        buffered += value;
      }
    } finally {
      clearTimeout(deadline);
    }
    const at = buffered.indexOf("\n");
    const line = buffered.slice(0, at);
    buffered = buffered.slice(at + 1);
    return JSON.parse(line);
  };
  const ready = await nextLine();
  if (ready.ready !== true) throw new Error(`store client for ${host}: ${JSON.stringify(ready)}`);
  const send = async (command: Record<string, unknown>) => {
    await writer.write(new TextEncoder().encode(JSON.stringify(command) + "\n"));
    return nextLine();
  };
  return {
    async put(keys) {
      const answer = await send({ put: keys });
      const failed = answer.failed as string[];
      if (failed.length > 0) {
        throw new Error(`put failed for ${failed.length} keys, e.g. ${failed[0]}`);
      }
    },
    async remove(keys) {
      await send({ remove: keys });
    },
    async close() {
      await writer.close().catch(() => {});
      const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await child.status;
      clearTimeout(killer);
      await lines.cancel().catch(() => {});
    },
  };
}

/**
 * Scheduling policies on real engines: two vLLM CPU engines, each on a core of its own and with
 * its own prefix cache, serving a random Qwen3 on which prefill dominates a miss (`--model tiny`:
 * the real-engine suite's tiny one; `--engine-cores shared`: both engines on every core), started
 * once. With `--kv store` (the default) both write their KV through the MooncakeStoreConnector into
 * one real mooncake_master, as tests/real/vllm_hits_test.ts runs them, and the router reads the
 * master; with `--kv local` the engines have no connector and the router knows only what it
 * dispatched (`kv.store: "none"`, its predicted index kept for the whole run).
 * For each arm a router in front of them (tidegate as its own process with the policy named, or,
 * for an `smg:P` arm, the SGLang Model Gateway with its policy P: tests/support/smg.ts), the
 * engines' prefix caches and the store emptied first (vLLM's `/reset_prefix_cache` with
 * `reset_external=true`, which also runs `remove_all` on the master), and the same seeded workload
 * sent to it: long documents picked with Zipf popularity, each request a document and a question
 * of its own, streamed, a few at a time.
 * Per arm: client TTFT (the first content byte), the engines' `cached_tokens` over their
 * `prompt_tokens`, the hit tidegate predicted, how the requests split over the engines (their own
 * counters), and tidegate's experiment verdict of the first arm (by default its default policy)
 * against every other arm, also with each arm's places pooled when an arm is listed twice.
 * docs/real_policy_comparison.md has runs and what they do and do not show.
 *
 * usage: deno task bench:policies [--requests N] [--concurrency C] [--seed S]
 *        [--policies a,b:param=N,c@workers=0,smg:cache_aware] [--kv store|local] [--out FILE]
 *        [--decisions FILE] (`--help` lists every option)
 * (after `deno task setup:real`, which installs vLLM, mooncake_master and SMG into .venv)
 */
import { resolveConfig } from "../../src/config/load.ts";
import {
  type ArmObservation,
  armReport,
  ArmTally,
  compareArms,
} from "../../src/experiment/arm_stats.ts";
import { verdictLine } from "../../src/experiment/verdict.ts";
import { parsePolicySpec, type PolicySpec } from "../../src/scheduling/policy_spec.ts";
import { CLUSTERS } from "../../src/experiment/clustered.ts";
import {
  SMG_PATH,
  SMG_VERSION,
  smgLaunchArgs,
  smgMissing,
  type SmgPolicy,
  waitForSmgWorkers,
} from "../support/smg.ts";
import { startRealProcess } from "./real_process.ts";
import { cpuMs } from "../bench/overhead/procs.ts";
import { createRouter } from "../../routes/app.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import {
  DOCUMENTS,
  makeWorkload,
  messagesOf,
  WORDS,
  type Workload,
  ZIPF_S,
} from "./policy_workload.ts";
import { waitFor } from "../support/eventually.ts";
import { type RealMaster, startRealMaster } from "./mooncake_master.ts";
import { freePort, REAL, requireRealPrograms } from "./real_env.ts";
import { CPU_BLOCK_SIZE, kvEventEndpoints, startVllm, type VllmEngine } from "./vllm_engine.ts";

const USAGE = "usage: deno task bench:policies [--requests N] " +
  "[--concurrency C] [--documents D] [--seed S] " +
  "[--policies a,b:param=N,c@workers=N@server=deno@hold=N,smg:P] [--kv store|local] " +
  "[--warmup N] [--engine-cores own|shared] [--model tiny|prefill] [--cache-blocks N] " +
  "[--out FILE] " +
  "[--in-process] [--decisions FILE] [--reference DIR]\n" +
  "  tidegate runs as its own process (`cli/main.ts start`), like SMG; --in-process runs it in " +
  "the benchmark's process instead (--decisions, its decision logs, implies it)\n" +
  "  --warmup N: each router first serves N requests over other documents (caches emptied " +
  "after), so that a router's start-up (JIT, tokenizer) is not measured; default 0\n" +
  "  --engine-cores own (the default): each engine pinned to a core of its own (taskset), as a " +
  "cluster's instances each have their own device; shared: both engines on every core\n" +
  "  --model prefill (the default): the engines serve a larger random model (4 layers, hidden " +
  "size 256), where a 2k-token prefill takes several times a cached prompt's TTFT; tiny: the " +
  "real-engine suite's model\n" +
  "  --cache-blocks N (at least 64): each engine's KV cache holds N blocks of 128 tokens " +
  "(`--num-gpu-blocks-override`; default what 1 GiB holds, which no run fills), so that " +
  "documents are evicted\n" +
  "  an arm named `P@events` subscribes tidegate to the engines' KV events (the engines then " +
  "publish them, for every arm of the run), so that it sees what they evict\n" +
  "  an arm named `P@poolloads` tells tidegate the engines load from the store by themselves " +
  "(`kv.poolLoads`; with --kv store), `P@nopoolloads` that they do not; neither: the default " +
  "for the engines' key format (on: vLLM's MooncakeStoreConnector loads)\n" +
  "  an arm named `smg:P@flag=value` adds `--flag value` to SMG's launch\n" +
  "  an arm named direct sends every request to the first engine, without a router: the floor " +
  "a router's added latency is read against (with --concurrency 1)\n" +
  "  --reference DIR: arms named `ref:P` run tidegate from the checkout at DIR (e.g. a git " +
  "worktree of an earlier commit) with policy P, as its own process: the previous " +
  "implementation measured in the same run";

/**
 * tidegate's default (affinity_ttft), its previous default (cache_aware) and mooncake_ttft; the
 * peer router, SMG, with its cache-aware policy (`smg:` arms run `smg launch --policy P` in front
 * of the same engines); round robin as the baseline.
 */
const DEFAULT_POLICIES = [
  "affinity_ttft",
  "cache_aware",
  "mooncake_ttft",
  "smg:cache_aware",
  "round_robin",
];
/** The arm without a router: the client sends every request to the first engine itself. */
const DIRECT_ARM = "direct";
/** Each engine publishes its store segment under its own loopback address (the router's kvHost). */
const HOSTS = ["127.0.0.2", "127.0.0.3"];
/** Generated tokens per answer: TTFT is what is measured, decode only holds the engine. */
const MAX_TOKENS = 4;

interface Options {
  requests: number;
  /** Documents the requests pick from (Zipf). */
  documents: number;
  concurrency: number;
  seed: number;
  policies: string[];
  kv: "store" | "local";
  out?: string;
  /** Where the routers' decision logs (every candidate's terms) go, as JSON by policy. */
  decisions?: string;
  /** tidegate in the benchmark's own process (its decision log readable) instead of its own. */
  inProcess: boolean;
  /** Requests over other documents each router serves before the measured ones. */
  warmup: number;
  /** A checkout of another tidegate commit, which the `ref:` arms run. */
  reference?: string;
  /** `own`: each engine pinned to a core of its own; `shared`: both on every core. */
  engineCores: "own" | "shared";
  /** The engines' model: the tiny one, or the larger one where prefill dominates the TTFT. */
  model: "tiny" | "prefill";
  /** Each engine's KV cache in blocks (`--num-gpu-blocks-override`); default what 1 GiB holds. */
  cacheBlocks?: number;
}

function parseArgs(args: string[]): Options {
  const options: Options = {
    requests: 96,
    documents: DOCUMENTS,
    concurrency: 3,
    seed: 24,
    policies: DEFAULT_POLICIES,
    kv: "store",
    inProcess: false,
    warmup: 0,
    engineCores: "own",
    model: "prefill",
  };
  for (let i = 0; i < args.length; i++) {
    const flag = args[i];
    const value = args[i + 1];
    if (flag === "--help" || flag === "-h") {
      console.log(USAGE);
      Deno.exit(0);
    }
    if (flag === "--in-process") {
      options.inProcess = true;
      continue;
    }
    if (value === undefined) throw new Error(`${flag} needs a value\n${USAGE}`);
    i++;
    if (flag === "--requests") options.requests = positiveInt(flag, value);
    else if (flag === "--concurrency") options.concurrency = positiveInt(flag, value);
    else if (flag === "--documents") options.documents = positiveInt(flag, value);
    else if (flag === "--seed") options.seed = positiveInt(flag, value);
    else if (flag === "--policies") options.policies = value.split(",").filter((p) => p !== "");
    else if (flag === "--out") options.out = value;
    else if (flag === "--decisions") options.decisions = value;
    else if (flag === "--warmup") options.warmup = intAtLeast(flag, value, 0);
    // vLLM refuses a cache smaller than one request of --max-model-len (8192 tokens).
    else if (flag === "--cache-blocks") options.cacheBlocks = intAtLeast(flag, value, 64);
    else if (flag === "--reference") options.reference = value.replace(/\/?$/, "/");
    else if (flag === "--model") {
      if (value !== "tiny" && value !== "prefill") throw new Error(`--model takes tiny or prefill`);
      options.model = value;
    } else if (flag === "--engine-cores") {
      if (value !== "own" && value !== "shared") {
        throw new Error(`--engine-cores takes own or shared`);
      }
      options.engineCores = value;
    } else if (flag === "--kv") {
      if (value !== "store" && value !== "local") throw new Error(`--kv takes store or local`);
      options.kv = value;
    } else throw new Error(`unknown argument ${flag}\n${USAGE}`);
  }
  // The decision logs are read from the router object: in the benchmark's process only.
  if (options.decisions) options.inProcess = true;
  const poolLoadsArm = options.policies.find((arm) =>
    !arm.startsWith("smg:") && arm !== DIRECT_ARM && armSettings(arm).poolLoads !== undefined
  );
  if (poolLoadsArm && options.kv !== "store") {
    throw new Error(`arm ${poolLoadsArm}: @poolloads and @nopoolloads need --kv store\n${USAGE}`);
  }
  if (options.policies.some((p) => p.startsWith("ref:")) && !options.reference) {
    throw new Error(`ref: arms need --reference DIR\n${USAGE}`);
  }
  return options;
}

function positiveInt(flag: string, value: string): number {
  return intAtLeast(flag, value, 1);
}

function intAtLeast(flag: string, value: string, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new Error(`${flag} takes an integer >= ${min}`);
  return n;
}

/**
 * An arm's policy as the config takes it: `name`, or `name:key=value&key=value` for a policy with
 * parameters (e.g. `affinity_ttft:homeWeight=0`, the default without its home term).
 */
export function armPolicy(arm: string): string | PolicySpec {
  const spec = parsePolicySpec(arm);
  return Object.keys(spec.params).length === 0 ? spec.name : spec;
}

/** Router settings an arm may name after its policy (`P@workers=0@server=deno`). */
export interface ArmSettings {
  policy: string;
  /** `workers`: the tokenizer threads (on this machine they share the cores with the engines). */
  workers?: number;
  /** `listen.server`: node:http or Deno.serve. */
  server?: "node" | "deno";
  /** `hold=N`: late binding, `slo.queue.holdAboveTokens` N (docs/flow_control.md). */
  holdAboveTokens?: number;
  /** `events`: the router follows each engine's own cache by its KV events (`kvEvents`). */
  events?: boolean;
  /**
   * `poolloads` / `nopoolloads`: the engines load from the store by themselves, or not
   * (`kv.poolLoads`); neither: the key format's default.
   */
  poolLoads?: boolean;
}

/**
 * `P`, or `P@key=value@...`: `workers=N`, `server=node|deno`, `hold=N`, `events`, `poolloads`,
 * `nopoolloads`.
 */
export function armSettings(arm: string): ArmSettings {
  const [policy, ...pairs] = arm.split("@");
  const settings: ArmSettings = { policy };
  for (const pair of pairs) {
    const workers = pair.match(/^workers=(\d+)$/)?.[1];
    const server = pair.match(/^server=(node|deno)$/)?.[1] as "node" | "deno" | undefined;
    const hold = pair.match(/^hold=(\d+)$/)?.[1];
    if (workers !== undefined) settings.workers = Number(workers);
    else if (server !== undefined) settings.server = server;
    else if (hold !== undefined) settings.holdAboveTokens = Number(hold);
    else if (pair === "events") settings.events = true;
    else if (pair === "poolloads") settings.poolLoads = true;
    else if (pair === "nopoolloads") settings.poolLoads = false;
    else {
      throw new Error(
        `arm ${arm}: "${pair}" is not workers=N, server=node|deno, hold=N, events, poolloads ` +
          "or nopoolloads",
      );
    }
  }
  return settings;
}

function routerConfig(master: RealMaster | undefined, engines: VllmEngine[], arm: string) {
  return resolveConfig(rawRouterConfig(master, engines, arm, 0));
}

/** The router's config as a file holds it (`start --config`). */
function rawRouterConfig(
  master: RealMaster | undefined,
  engines: VllmEngine[],
  arm: string,
  port: number,
) {
  const { policy, workers, server, holdAboveTokens, events, poolLoads } = armSettings(arm);
  const keys = {
    hash: "sha256", // vLLM's default --prefix-caching-hash-algo
    chunkSize: CPU_BLOCK_SIZE,
    keyFormat: "vllm-mooncake-store",
    keyParams: { model: engines[0].model, group: 0 },
    minPromptTokens: CPU_BLOCK_SIZE,
  };
  const kv = master
    ? {
      ...keys,
      store: "mooncake",
      url: master.url,
      timeoutMs: 2_000,
      ...(poolLoads === undefined ? {} : { poolLoads }),
    }
    // With the engines' events the router's own dispatches bridge only until their events come
    // (the predicted index's default lifetime).
    : events
    ? { ...keys, store: "none" }
    // No store: the router's own dispatches are all it knows; with the engines' default caches
    // (524k tokens each of the prefill model, 2M of the tiny one) nothing is evicted in a run,
    // so those predictions are kept for the whole run.
    : { ...keys, store: "none", predictedIndex: { ttlMs: 3_600_000 } };
  return {
    listen: { host: "127.0.0.1", port, ...(server === undefined ? {} : { server }) },
    ...(workers === undefined ? {} : { workers }),
    models: [{
      name: REAL.modelName,
      tokenizer: { path: REAL.model },
      kv,
      policy: armPolicy(policy),
      // A held request waits as long as the bench's client does (its TTL ends no wait here).
      ...(holdAboveTokens === undefined
        ? {}
        : { slo: { queue: { enabled: true, holdAboveTokens, ttlS: 120, maxRequests: 1_024 } } }),
      health: { intervalMs: 1_000, timeoutMs: 2_000 },
      instances: engines.map((e, i) => ({
        id: `v${i}`,
        url: e.url,
        kvHost: HOSTS[i],
        ...(events ? { kvEvents: eventsOf(e, arm) } : {}),
      })),
    }],
  };
}

function eventsOf(engine: VllmEngine, arm: string) {
  if (!engine.kvEvents) throw new Error(`arm ${arm}: the engines publish no KV events`);
  return engine.kvEvents;
}

export interface Sample {
  index: number;
  doc: number;
  status: number;
  ttftMs: number;
  /** The first SSE event came without content (the model's first token decoded to nothing). */
  ttftFromEvent: boolean;
  promptTokens: number;
  cachedTokens: number;
  routerPromptTokens: number;
  routerHitTokens: number;
  instance: string;
  error?: string;
}

/** One streamed chat through the router: TTFT at the first content byte, usage from the end. */
async function send(url: string, workload: Workload, index: number): Promise<Sample> {
  const sample: Sample = {
    index,
    doc: workload.requests[index].doc,
    status: 0,
    ttftMs: NaN,
    ttftFromEvent: false,
    promptTokens: 0,
    cachedTokens: 0,
    routerPromptTokens: 0,
    routerHitTokens: 0,
    instance: "?",
  };
  const started = performance.now();
  let firstEventMs: number | undefined;
  try {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: REAL.modelName,
        messages: messagesOf(workload, index),
        max_tokens: MAX_TOKENS,
        stream: true,
        stream_options: { include_usage: true },
      }),
      signal: AbortSignal.timeout(120_000),
    });
    sample.status = response.status;
    sample.instance = response.headers.get("x-tidegate-instance") ?? "?";
    sample.routerPromptTokens = Number(response.headers.get("x-tidegate-prompt-tokens") ?? 0);
    sample.routerHitTokens = Number(response.headers.get("x-tidegate-hit-tokens") ?? 0);
    if (!response.ok || !response.body) {
      sample.error = (await response.text()).slice(0, 300);
      return sample;
    }
    let buffered = "";
    for await (const chunk of response.body.pipeThrough(new TextDecoderStream())) {
      buffered += chunk;
      let at: number;
      while ((at = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, at).trim();
        buffered = buffered.slice(at + 1);
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") continue;
        const event = JSON.parse(data);
        if (event.error) sample.error = JSON.stringify(event.error).slice(0, 300);
        const content = event.choices?.[0]?.delta?.content;
        if (event.choices?.length > 0) firstEventMs ??= performance.now() - started;
        if (typeof content === "string" && content.length > 0 && Number.isNaN(sample.ttftMs)) {
          sample.ttftMs = performance.now() - started;
        }
        if (event.usage) {
          sample.promptTokens = event.usage.prompt_tokens ?? 0;
          sample.cachedTokens = event.usage.prompt_tokens_details?.cached_tokens ?? 0;
        }
      }
    }
    if (Number.isNaN(sample.ttftMs) && firstEventMs !== undefined) {
      sample.ttftMs = firstEventMs;
      sample.ttftFromEvent = true;
    }
  } catch (error) {
    sample.error = (error as Error).message;
  }
  return sample;
}

/** Sends every request of the workload, in order, `concurrency` at a time. */
async function runWorkload(url: string, workload: Workload, concurrency: number) {
  const samples: Sample[] = [];
  let next = 0;
  const worker = async () => {
    while (next < workload.requests.length) {
      const index = next++;
      samples[index] = await send(url, workload, index);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { samples, wallS: (performance.now() - started) / 1000 };
}

/** Empties both engines' prefix caches and the store; fails unless the store ends up empty. */
async function resetCaches(engines: VllmEngine[], master: RealMaster | undefined): Promise<void> {
  const query = master ? "?reset_external=true" : "";
  for (const engine of engines) {
    // false while blocks are still held (an answer finishing): retried until it succeeds.
    await waitFor(
      async () => {
        const response = await fetch(
          `${engine.url}/reset_prefix_cache${query}`,
          { method: "POST" },
        );
        const body = await response.json().catch(() => ({}));
        if (response.status === 404) {
          throw new Error(`${engine.url}/reset_prefix_cache: 404 (needs VLLM_SERVER_DEV_MODE=1)`);
        }
        return body.success === true ? true : undefined;
      },
      60_000,
      `${engine.url}/reset_prefix_cache to succeed`,
    );
  }
  if (!master) return;
  // remove_all goes through the store client: wait until the master holds no key.
  let keys = -1;
  await waitFor(
    async () => {
      keys = await storeKeyCount(master);
      return keys === 0 ? true : undefined;
    },
    30_000,
    () => `the store to be empty (${keys} keys)`,
  );
}

async function storeKeyCount(master: RealMaster): Promise<number> {
  const response = await fetch(`${master.url}/get_all_keys`);
  const text = await response.text();
  if (!response.ok) throw new Error(`get_all_keys: ${response.status} ${text.slice(0, 200)}`);
  return text.split("\n").map((l) => l.trim()).filter((l) => l !== "").length;
}

/** A short chat straight to each engine, so the first policy does not pay the engines' warm-up. */
async function warmEngines(engines: VllmEngine[]): Promise<void> {
  await Promise.all(engines.map(async (engine) => {
    const response = await fetch(`${engine.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: REAL.modelName,
        messages: [{ role: "user", content: WORDS.join(" ") }],
        max_tokens: MAX_TOKENS,
      }),
    });
    if (!response.ok) throw new Error(`warm-up: ${response.status} ${await response.text()}`);
    await response.body?.cancel();
  }));
}

export interface PolicyResult {
  policy: string;
  samples: Sample[];
  wallS: number;
  /** The router's live agreement per instance at the end (src/kv/kv_agreement.ts). */
  agreement: string[];
  /** Keys in the store after the run (0 without one). */
  storeKeys: number;
  /** Requests each engine finished during the arm (from its own metrics). */
  servedPerEngine: number[];
  /**
   * CPU the router process used during the arm (all threads and children), in ms; undefined when
   * it ran in the benchmark's own process, whose client shares the count.
   */
  routerCpuMs?: number;
  /** CPU the engines' processes (and their workers) used during the arm, in ms. */
  enginesCpuMs?: number;
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const at = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[at];
}

const mean = (values: number[]) => values.reduce((s, v) => s + v, 0) / values.length;
const ms = (value: number) => Number.isNaN(value) ? "-" : String(Math.round(value));
const pct = (num: number, den: number) => den === 0 ? "-" : `${(100 * num / den).toFixed(1)}%`;

function summaryTable(results: PolicyResult[], instances: string[]): string {
  const rows = [
    "| policy | requests (errors) | mean TTFT ms | p50 TTFT ms | p90 TTFT ms | engine cached / prompt tokens | router predicted hit / prompt tokens | requests per engine | documents on both engines | wall s | router CPU ms per request | engines' CPU s |",
    "| --- | --: | --: | --: | --: | --: | --: | --- | --: | --: | --: | --: |",
  ];
  for (const result of results) {
    const { policy, samples, wallS, servedPerEngine } = result;
    const ok = samples.filter((s) => s.status === 200 && !s.error && !Number.isNaN(s.ttftMs));
    const ttfts = ok.map((s) => s.ttftMs).sort((a, b) => a - b);
    const prompt = ok.reduce((s, x) => s + x.promptTokens, 0);
    const cached = ok.reduce((s, x) => s + x.cachedTokens, 0);
    const routerPrompt = ok.reduce((s, x) => s + x.routerPromptTokens, 0);
    const routerHit = ok.reduce((s, x) => s + x.routerHitTokens, 0);
    // From the engines' own counters: SMG names no instance in its answers.
    const split = instances.map((id, i) => `${id} ${servedPerEngine[i] ?? "?"}`).join(" / ");
    const docsOn = new Map<number, Set<string>>();
    for (const s of ok) docsOn.set(s.doc, (docsOn.get(s.doc) ?? new Set()).add(s.instance));
    const both = ok.some((s) => s.instance === "?")
      ? "-"
      : `${[...docsOn.values()].filter((set) => set.size > 1).length} of ${docsOn.size}`;
    rows.push(
      `| ${policy} | ${samples.length} (${samples.length - ok.length}) | ${ms(mean(ttfts))} | ` +
        `${ms(quantile(ttfts, 0.5))} | ${ms(quantile(ttfts, 0.9))} | ` +
        `${pct(cached, prompt)} (${cached} / ${prompt}) | ` +
        (routerPrompt > 0
          ? `${pct(routerHit, routerPrompt)} (${routerHit} / ${routerPrompt})`
          : "-") +
        ` | ${split} | ${both} | ${wallS.toFixed(1)} | ` +
        (result.routerCpuMs === undefined
          ? "-"
          : (result.routerCpuMs / samples.length).toFixed(1)) +
        ` | ${result.enginesCpuMs === undefined ? "-" : (result.enginesCpuMs / 1000).toFixed(1)} |`,
    );
  }
  return rows.join("\n");
}

/**
 * TTFT by where the document came from: the serving engine's own cache or segment (the router
 * predicted the hit; with `kv.poolLoads` its prediction counts loads from the store too), another
 * engine's segment loaded through the store (the engine reused more than the router predicted),
 * or prefilled (the engine reused under half the prompt).
 */
function hitMissTable(results: PolicyResult[]): string {
  const rows = [
    "| policy | hits the router predicted (own cache; with poolLoads, loads too) | their mean TTFT ms | hits it did not (loaded from the other engine's segment) | their mean TTFT ms | prefilled (cached < half) | their mean TTFT ms | predicted hit = engine cached |",
    "| --- | --: | --: | --: | --: | --: | --: | --: |",
  ];
  const cell = (group: Sample[]) => `${group.length} | ${ms(mean(group.map((s) => s.ttftMs)))}`;
  for (const { policy, samples } of results) {
    // No predicted hit to sort by.
    if (policy.startsWith("smg:") || policy === DIRECT_ARM) continue;
    const ok = samples.filter((s) => s.status === 200 && !s.error && !Number.isNaN(s.ttftMs));
    const warm = ok.filter((s) => 2 * s.cachedTokens >= s.promptTokens);
    const own = warm.filter((s) => 2 * s.routerHitTokens >= s.promptTokens);
    const pooled = warm.filter((s) => 2 * s.routerHitTokens < s.promptTokens);
    const cold = ok.filter((s) => 2 * s.cachedTokens < s.promptTokens);
    const agree = ok.filter((s) => s.routerHitTokens === s.cachedTokens).length;
    rows.push(
      `| ${policy} | ${cell(own)} | ${cell(pooled)} | ${cell(cold)} | ${agree} of ${ok.length} |`,
    );
  }
  return rows.join("\n");
}

async function git(args: string[]): Promise<string> {
  const out = await new Deno.Command("git", { args, stdout: "piped", stderr: "null" }).output();
  return new TextDecoder().decode(out.stdout).trim();
}

const loadavg = () => Deno.readTextFileSync("/proc/loadavg").trim();

/** One tidegate router in-process in front of the engines, with `policy`. */
async function runTidegateArm(
  policy: string,
  master: RealMaster | undefined,
  engines: VllmEngine[],
  measure: Measure,
  options: Options,
  decisions: Record<string, unknown>,
): Promise<PolicyResult> {
  const router = await createRouter(routerConfig(master, engines, policy), { log: () => {} });
  try {
    if (!await router.warm(60_000)) throw new Error("the router's tokenizer workers");
    const { port } = await router.serve({ hostname: "127.0.0.1", port: 0 });
    const run = await measure(`http://127.0.0.1:${port}`, []);
    const runtime = router.registry.runtime(REAL.modelName)!;
    const agreement = runtime.cluster.entries().map((e) =>
      `${e.config.id} ${runtime.agreement.state(e.config.id)}`
    );
    const storeKeys = master ? await storeKeyCount(master) : 0;
    decisions[policy] = router.decisions.recent(options.requests);
    return { policy, ...run, agreement, storeKeys };
  } finally {
    await router.close();
  }
}

/**
 * tidegate as its own process (`deno run -A cli/main.ts start`), as SMG runs: the benchmark's
 * client then shares no event loop with it. The agreement is read from its /metrics.
 */
async function runTidegateProcess(
  arm: string,
  master: RealMaster | undefined,
  engines: VllmEngine[],
  measure: Measure,
  reference: string | undefined,
): Promise<PolicyResult> {
  const port = freePort();
  const dir = await Deno.makeTempDir({ prefix: "tidegate-bench-" });
  const config = `${dir}/tidegate.json`;
  // A `ref:P` arm: policy P, run by the reference checkout's router.
  const [root, policy] = arm.startsWith("ref:")
    ? [reference!, arm.slice("ref:".length)]
    : [REAL.root, arm];
  await Deno.writeTextFile(config, JSON.stringify(rawRouterConfig(master, engines, policy, port)));
  const router = startRealProcess(
    "tidegate",
    Deno.execPath(),
    ["run", "-A", `${root}cli/main.ts`, "start", "--config", config],
  );
  try {
    const url = `http://127.0.0.1:${port}`;
    await waitFor(
      async () => {
        if (!router.alive()) throw new Error(`tidegate exited:\n${router.logTail(30)}`);
        const status = await fetch(`${url}/readyz`).then((r) => {
          r.body?.cancel();
          return r.status;
        }, () => 0);
        return status === 200 ? true : undefined;
      },
      120_000,
      "tidegate to be ready",
    );
    const run = await measure(url, [router.pid]);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    const agreement = engines.map((_, i) => {
      const state = metrics.match(
        new RegExp(`tidegate_kv_agreement\\{[^}]*instance="v${i}",state="(\\w+)"\\} 1`),
      )?.[1];
      return `v${i} ${state ?? "?"}`;
    });
    const storeKeys = master ? await storeKeyCount(master) : 0;
    return { policy: arm, ...run, agreement, storeKeys };
  } finally {
    await router.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

type MeasuredRun = Pick<
  PolicyResult,
  "samples" | "wallS" | "servedPerEngine" | "routerCpuMs" | "enginesCpuMs"
>;
/** Runs the measured workload through the router at `url` (its processes: `routerPids`). */
type Measure = (url: string, routerPids: number[]) => Promise<MeasuredRun>;

/**
 * The measured part of an arm, the same for every router: the warm-up (when asked for) and the
 * caches emptied after it, then the workload, with what each engine served and the CPU used.
 */
function measurer(
  workload: Workload,
  warmup: Workload | undefined,
  engines: VllmEngine[],
  master: RealMaster | undefined,
  concurrency: number,
): Measure {
  return async (url, routerPids) => {
    if (warmup) {
      await runWorkload(url, warmup, concurrency);
      await resetCaches(engines, master);
    }
    const before = await enginesServed(engines);
    const cpu = await cpuDuring(routerPids, engines);
    const run = await runWorkload(url, workload, concurrency);
    const { routerCpuMs, enginesCpuMs } = await cpu.end();
    const after = await enginesServed(engines);
    const servedPerEngine = after.map((n, i) => n - before[i]);
    return { ...run, servedPerEngine, routerCpuMs, enginesCpuMs };
  };
}

/**
 * CPU used from now until `end()` by the router processes (`routerPids`; none for an in-process
 * router) and by the engines: on this machine they share the cores, so a router's own cost shows
 * in the engines' TTFT.
 */
async function cpuDuring(routerPids: number[], engines: VllmEngine[]) {
  const total = async (pids: number[]) =>
    (await Promise.all(pids.map((pid) => cpuMs(pid)))).reduce((a, b) => a + b, 0);
  const enginePids = engines.map((e) => e.process.pid);
  const [router0, engines0] = [await total(routerPids), await total(enginePids)];
  return {
    end: async () => ({
      routerCpuMs: routerPids.length > 0 ? await total(routerPids) - router0 : undefined,
      enginesCpuMs: await total(enginePids) - engines0,
    }),
  };
}

/**
 * No router: every request straight to the first engine, as the floor a router's added latency
 * is read against (at `--concurrency 1` nothing queues behind another request).
 */
async function runDirectArm(engines: VllmEngine[], measure: Measure): Promise<PolicyResult> {
  const run = await measure(engines[0].url, []);
  return { policy: DIRECT_ARM, ...run, agreement: [], storeKeys: 0 };
}

/** The SGLang Model Gateway in front of the same engines (`smg:<policy>`). */
async function runSmgArm(
  arm: string,
  engines: VllmEngine[],
  measure: Measure,
): Promise<PolicyResult> {
  const { policy, flags } = smgArm(arm);
  const port = freePort();
  const workers = engines.map((e) => e.url);
  const smg = startRealProcess(
    "smg",
    SMG_PATH,
    [...smgLaunchArgs({ port, metricsPort: freePort(), workers, policy }), ...flags],
  );
  try {
    const url = `http://127.0.0.1:${port}`;
    await waitForSmgWorkers(url, workers, 120_000, () => smg.alive()).catch((error) => {
      throw new Error(`${error.message}\n${smg.logTail(30)}`);
    });
    const run = await measure(url, [smg.pid]);
    return { policy: arm, ...run, agreement: [], storeKeys: 0 };
  } finally {
    await smg.stop();
  }
}

/**
 * An `smg:P` arm, or `smg:P@flag=value@...`: SMG's policy P with `--flag value` added to its
 * launch (e.g. `smg:cache_aware@max-tree-size=400000@eviction-interval-secs=1`).
 */
export function smgArm(arm: string): { policy: SmgPolicy; flags: string[] } {
  const [policy, ...pairs] = arm.slice("smg:".length).split("@");
  const flags = pairs.flatMap((pair) => {
    const [, flag, value] = pair.match(/^([a-z][a-z-]*)=([\w.]+)$/) ?? [];
    if (flag === undefined) throw new Error(`arm ${arm}: "${pair}" is not flag=value`);
    return [`--${flag}`, value];
  });
  return { policy: policy as SmgPolicy, flags };
}

/** Requests each engine has finished so far (`vllm:request_success_total`, all labels). */
async function enginesServed(engines: VllmEngine[]): Promise<number[]> {
  return await Promise.all(engines.map(async (engine) => {
    const text = await (await fetch(`${engine.url}/metrics`)).text();
    return text.split("\n").filter((line) => line.startsWith("vllm:request_success_total"))
      .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(" ") + 1)), 0);
  }));
}

/**
 * tidegate's experiment verdict (src/experiment/verdict.ts), as its live A/B test reports it:
 * the first arm against every other arm on client TTFT, clustered by document.
 */
export function verdictLines(results: PolicyResult[]): string[] {
  const tallied = results.map((r) => tallyOf(r.policy, r.samples));
  const [arm, ...controls] = tallied;
  if (controls.length === 0) return ["(one arm in this run: no verdict)"];
  return controls.map((control) =>
    verdictLine(compareArms(arm, control), arm.report, control.report)
  );
}

/**
 * The same verdict with each arm's places in the run pooled (an arm listed twice counts all its
 * requests): an arm's place moves it (docs/real_policy_comparison.md, "Late binding on real
 * engines"), and arms that take turns share that out. Empty when no arm is listed twice.
 */
export function pooledVerdictLines(results: PolicyResult[]): string[] {
  const byArm = new Map<string, Sample[]>();
  for (const r of results) byArm.set(r.policy, [...byArm.get(r.policy) ?? [], ...r.samples]);
  if (byArm.size === results.length) return [];
  const [arm, ...controls] = [...byArm].map(([policy, samples]) => tallyOf(policy, samples));
  return controls.map((control) =>
    verdictLine(compareArms(arm, control), arm.report, control.report)
  );
}

function tallyOf(policy: string, samples: readonly Sample[]) {
  const tally = new ArmTally();
  for (const s of samples) tally.record(observation(policy, s));
  return { report: armReport({ name: policy, policy, weight: 1 }, tally), tally };
}

/** The pooled verdict's lines in the report, when an arm was listed more than once. */
function pooledSection(results: PolicyResult[]): string[] {
  const lines = pooledVerdictLines(results);
  if (lines.length === 0) return [];
  return [
    `The same, each arm's places in the run pooled, ${results[0].policy} against each arm:`,
    "",
    ...lines.map((line) => `- ${line}`),
    "",
  ];
}

function observation(arm: string, s: Sample): ArmObservation {
  const served = s.status === 200 && !s.error && !Number.isNaN(s.ttftMs);
  return {
    arm,
    outcome: served ? "served" : "error",
    ttftS: served ? s.ttftMs / 1000 : undefined,
    cluster: s.doc % CLUSTERS,
    engineCachedTokens: s.cachedTokens,
    enginePromptTokens: s.promptTokens,
  };
}

async function main(): Promise<void> {
  const options = parseArgs(Deno.args);
  requireRealPrograms();
  const model = options.model === "prefill" ? REAL.prefillModel : REAL.model;
  const modelFile = `${model}/model.safetensors`;
  if (!await Deno.stat(modelFile).then(() => true, () => false)) {
    throw new Error(`${modelFile} is missing: run \`deno task setup:real\` first`);
  }
  if (options.policies.some((p) => p.startsWith("smg:"))) {
    const why = await smgMissing();
    if (why) throw new Error(why);
  }
  const command = ["deno run -A tests/real/policy_comparison_bench.ts", ...Deno.args].join(" ");
  const date = new Date().toISOString();
  const commit = await git(["rev-parse", "--short", "HEAD"]);
  const dirty = (await git(["status", "--porcelain", "--untracked-files=no"])) !== "";
  const referenceCommit = options.reference
    ? await git(["-C", options.reference, "rev-parse", "--short", "HEAD"])
    : undefined;
  const loadStart = loadavg();
  const started = performance.now();

  const tokenizer = await loadTokenizer(REAL.model);
  const countTokens = (text: string) => tokenizer.encode(text).length;
  const workload = makeWorkload(options, countTokens);
  // Other documents (another seed), so the warm-up leaves nothing the measured requests reuse.
  const warmup = options.warmup > 0
    ? makeWorkload({ seed: options.seed + 1, requests: options.warmup }, countTokens)
    : undefined;
  const promptOf = (i: number) => tokenizer.encodeChat(messagesOf(workload, i)).length;
  const perDoc = workload.documents.map((_, d) =>
    workload.requests.filter((r) => r.doc === d).length
  );
  const progress = (line: string) =>
    console.error(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${line}`);
  progress(
    `workload: ${workload.requests.length} requests over ${options.documents} documents of ` +
      `${Math.min(...workload.documentTokens)}-${Math.max(...workload.documentTokens)} tokens ` +
      `(requests per document ${perDoc.join(" ")}); first prompt ${promptOf(0)} tokens`,
  );

  const master = options.kv === "store" ? await startRealMaster() : undefined;
  const engines: VllmEngine[] = [];
  const results: PolicyResult[] = [];
  const decisions: Record<string, unknown> = {};
  try {
    progress("starting 2 vLLM engines");
    // The engines publish KV events when an arm follows them (`P@events`).
    const publish = options.policies.some((arm) =>
      !arm.startsWith("smg:") && armSettings(arm).events
    );
    const ends = publish ? await Promise.all(HOSTS.map(() => kvEventEndpoints())) : undefined;
    const cacheArgs = options.cacheBlocks === undefined
      ? []
      : ["--num-gpu-blocks-override", String(options.cacheBlocks)];
    engines.push(
      ...await Promise.all(
        HOSTS.map((kvHost, i) =>
          startVllm({
            ...(master ? { mooncakeMaster: master.rpcAddress, kvHost } : {}),
            ...(ends
              ? { kvEventsEndpoint: ends[i].pub, kvEventsReplayEndpoint: ends[i].replay }
              : {}),
            args: cacheArgs,
            model,
            ...(options.engineCores === "own"
              ? { cpus: String(i % navigator.hardwareConcurrency) }
              : {}),
            startTimeoutMs: 600_000,
          })
        ),
      ),
    );
    progress(`engines up: ${engines.map((e) => e.url).join(", ")}`);
    await warmEngines(engines);
    const measure = measurer(workload, warmup, engines, master, options.concurrency);
    for (const policy of options.policies) {
      await resetCaches(engines, master);
      progress(`${policy}: caches and store empty`);
      const result = policy === DIRECT_ARM
        ? await runDirectArm(engines, measure)
        : policy.startsWith("smg:")
        ? await runSmgArm(policy, engines, measure)
        : options.inProcess && !policy.startsWith("ref:")
        ? await runTidegateArm(policy, master, engines, measure, options, decisions)
        : await runTidegateProcess(policy, master, engines, measure, options.reference);
      results.push(result);
      const failed = result.samples.filter((s) => s.error || s.status !== 200);
      progress(
        `${policy}: ${result.samples.length} requests in ${result.wallS.toFixed(1)} s` +
          `; agreement ${result.agreement.join(", ") || "-"}; ${result.storeKeys} keys in the ` +
          "store" +
          (failed.length > 0 ? `, ${failed.length} failed, e.g. ${JSON.stringify(failed[0])}` : ""),
      );
    }
  } finally {
    await Promise.all(engines.map((e) => e.stop()));
    await master?.stop();
  }

  const loadEnd = loadavg();
  const fromEvent = results.flatMap((r) => r.samples).filter((s) => s.ttftFromEvent).length;
  const report = [
    `# Policies on real engines (tests/real/policy_comparison_bench.ts)`,
    "",
    `- date: ${date}`,
    `- commit: ${commit}${dirty ? " (with uncommitted changes in the working tree)" : ""}`,
    `- command: \`${command}\``,
    `- machine: ${navigator.hardwareConcurrency} cores; /proc/loadavg at start \`${loadStart}\`, ` +
    `at end \`${loadEnd}\``,
    `- cluster: 2 × vLLM 0.32.0 CPU (${options.model} Qwen3, ${CPU_BLOCK_SIZE}-token blocks, ` +
    "prefix caching" +
    (options.cacheBlocks === undefined
      ? ""
      : `, a KV cache of ${options.cacheBlocks} blocks (${
        options.cacheBlocks * CPU_BLOCK_SIZE
      } tokens) each`) +
    (options.engineCores === "own"
      ? "; each engine pinned to a core of its own, the router on either)"
      : "; both engines on every core)") +
    (master
      ? " + MooncakeStoreConnector into one mooncake_master (local_first), the router reading " +
        "the master; prefix caches and store emptied before each policy"
      : ", no KV connector: each engine its own prefix cache, the router with `kv.store: " +
        '"none"` (its own dispatches only; an `@events` arm follows the engines\' KV events ' +
        "and keeps its own dispatches for the predicted index's default 5 s, the others for the " +
        "whole run); prefix caches emptied before each policy"),
    `- workload: ${workload.requests.length} streamed chats, concurrency ${options.concurrency}, ` +
    `seed ${options.seed}; ${options.documents} documents of ${
      Math.min(...workload.documentTokens)
    }-` +
    `${Math.max(...workload.documentTokens)} tokens picked with Zipf(${ZIPF_S}) (requests per ` +
    `document: ${perDoc.join(", ")}), each with a question of its own; ${MAX_TOKENS} tokens out`,
    `- routers: tidegate (this commit, ${
      options.inProcess ? "in the benchmark's process" : "its own process: `cli/main.ts start`"
    }) with each policy named; ` +
    `SMG ${SMG_VERSION} (\`smg launch --policy P\`, a fresh process per arm, HTTP workers: ` +
    "routes on the request text, does not tokenize) for the `smg:` arms" +
    (referenceCommit
      ? `; for the \`ref:\` arms, tidegate at ${referenceCommit} (${options.reference}, its own ` +
        "process)"
      : "") +
    ". Arms run one after another on the same engines, caches emptied between them",
    `- warm-up: ${
      warmup
        ? `each router first served ${options.warmup} requests over other documents ` +
          `(seed ${options.seed + 1}), then the engines' caches were emptied (the router ` +
          "keeps its own state)"
        : "none: each router's start-up (JIT, tokenizer) falls in its measured requests"
    }; router and engines' CPU counted over the measured requests only`,
    `- TTFT: client side, request sent to first content byte` +
    (fromEvent > 0 ? ` (${fromEvent} answers had no content: their first SSE event)` : ""),
    `- total run: ${((performance.now() - started) / 1000).toFixed(0)} s`,
    "",
    summaryTable(results, ["v0", "v1"]),
    "",
    hitMissTable(results),
    "",
    "| policy | router's KV agreement at the end | keys in the store at the end |",
    "| --- | --- | --: |",
    ...results.map((r) => `| ${r.policy} | ${r.agreement.join(", ") || "-"} | ${r.storeKeys} |`),
    "",
    `tidegate's experiment verdict (src/experiment/verdict.ts; TTFT clustered by document), ` +
    `${results[0]?.policy} (the first arm) against each arm:`,
    "",
    ...verdictLines(results).map((line) => `- ${line}`),
    "",
    ...pooledSection(results),
  ].join("\n");
  console.log(report);
  if (options.out) await Deno.writeTextFile(options.out, report);
  if (options.decisions) {
    await Deno.writeTextFile(options.decisions, JSON.stringify(decisions, null, 1));
  }
}

if (import.meta.main) {
  await main();
}

/**
 * A fake OpenAI-compatible engine (vLLM or SGLang flavour) on 127.0.0.1 (or ::1), for the router's
 * end-to-end tests and the demo's embedded cluster.
 *
 * It behaves like one GPU: prefills run one at a time in arrival order (FIFO), each taking the
 * prefill-time model's duration for its uncached tokens (prefill_time.ts) times `timeScale`; decodes
 * run concurrently, one token per `decodeSecondsPerToken · timeScale`. Token counting, prefix-cache
 * lookup and cache writes are injected functions, so the demo can wire in the real tokenizer and KV
 * store while tests use the rough defaults.
 *
 * Load endpoints mirror the real ones closely enough for the router's readers: vLLM `/metrics`
 * (Prometheus text), SGLang `/get_load` (JSON) and `/metrics`.
 *
 * With `pd` the engine is one half of a prefill/decode pair of vLLM NIXL, vLLM Mooncake or SGLang
 * and validates the fields and the sequence of that protocol (docs/compat.md §7): a prefill
 * publishes its KV to an in-process registry (pd_registry.ts), a decode claims it (waiting, for
 * the concurrent protocols) and is charged a KV transfer instead of a prefill.
 */
import type { PrefillModelCoefficients } from "../scheduling/types.ts";
import { DEFAULT_TTFT_PARAMS } from "../scheduling/ttft_estimate.ts";
import type { EngineKvCache } from "./engine_kv_cache.ts";
import type { OpenAiBody } from "./openai_body.ts";
import {
  responseCompleted,
  responseCreated,
  responseDelta,
  responseNotFound,
  responseObject,
  ResponseStore,
} from "./fake_responses.ts";
import {
  anthropicEngineError,
  anthropicMessage,
  anthropicStreamDelta,
  anthropicStreamEnd,
  anthropicStreamStart,
} from "./fake_anthropic.ts";
import { AUDIO_PATHS, audioAnswer } from "./fake_audio_routes.ts";
import {
  generateAnswer,
  generateEvents,
  generateRefusal,
  generateRids,
  generateView,
} from "./fake_sglang_generate.ts";
import {
  type FakeRunner,
  isUtilityPath,
  servesRoute,
  utilityAnswer,
} from "./fake_utility_routes.ts";
import { MOONCAKE_PREFILL_MODEL, prefillSeconds } from "./prefill_time.ts";
import {
  checkPdRequest,
  dataParallelRankHeader,
  mooncakeKey,
  nixlKey,
  normalizeHost,
  parseBody,
  parseBootstrapAddr,
  type PdPlan,
  type PdProtocol,
  type PdRole,
  SGLANG_HEARTBEAT_MAX_FAILURES,
  SGLANG_HEARTBEAT_S,
  sglangBatchItems,
  sglangKey,
  UPSTREAM_TIMEOUT_S,
} from "./pd_protocol.ts";
import {
  defaultPdRegistry,
  type PdDecodeSide,
  type PdFailure,
  type PdPrefillSide,
  type PdRegistry,
  PdTransferError,
} from "./pd_registry.ts";

export type { PdProtocol, PdRole } from "./pd_protocol.ts";
export { defaultPdRegistry, PdRegistry, PdTransferError } from "./pd_registry.ts";

export type EngineFlavour = "vllm" | "sglang";

export type FailureMode =
  | "none"
  | "refuse"
  | "hang"
  | "http500"
  | "http503"
  | "midstream"
  /** A stream's first token, then half of the next event's line, then the connection breaks. */
  | "midline"
  | "slow_first_byte"
  /** Sends its headers (and a stream's first token), then nothing until the client leaves. */
  | "stall";

export type RequestOutcome =
  | "ok"
  | "client_abort"
  | "hang"
  | "http500"
  | "http503"
  | "midstream"
  | "stall"
  | "not_ready"
  | "bad_request"
  | "not_found"
  | "engine_closed"
  /** P/D: the KV hand-over failed (no prefill, timeout, dead peer, mismatch): 500 as upstream. */
  | "kv_transfer_failed";

export type { OpenAiBody } from "./openai_body.ts";

/** How the P/D part of a request ended (`RequestRecord.pd.outcome`). */
export type PdOutcome =
  /** Prefill: KV published (and, SGLang, taken by its decode); decode: KV received. */
  | "ok"
  /** Refused with 400 before any work (wrong or missing fields, prefill not max_tokens 1, ...). */
  | "invalid"
  /** Non-strict mode: served as an ordinary request, as upstream does with such a request. */
  | "degraded"
  /** A NIXL decode without kv_transfer_params, served as an ordinary request (both modes). */
  | "plain"
  | PdFailure;

export interface FakePdOptions {
  protocol: PdProtocol;
  role: PdRole;
  /**
   * vLLM Mooncake and SGLang prefill: port of the bootstrap server this fake runs on 127.0.0.1
   * (default 0: any free port; upstream's default is 8998). Decode requests name it.
   */
  bootstrapPort?: number;
  /** Where the prefill and decode fakes meet (default: the process-wide `defaultPdRegistry`). */
  registry?: PdRegistry;
  /**
   * Wall ms a decode waits for its prefill, a published prefill holds its KV, and an SGLang
   * prefill waits for its decode. Default: the upstream timeout (NIXL lease 30 s, Mooncake 480 s,
   * SGLang 300 s) times `timeScale`, at least 2000.
   */
  timeoutMs?: number;
  /**
   * Refuse (400) what upstream silently degrades, e.g. a decode request without
   * kv_transfer_params, which vLLM would prefill locally (default true). false serves such
   * requests as upstream does and records `pd.outcome: "degraded"`.
   */
  strict?: boolean;
  /** vLLM: this instance's engine id (default: a random UUID, as vLLM's kv_transfer_config). */
  engineId?: string;
  /** Decode: engine seconds per token received (default 327,680 B at 85 GB/s, docs/compat.md §8). */
  transferSecondsPerToken?: number;
  /** vLLM NIXL prefill: the side-channel port answered as `remote_port` (default 5600). */
  sideChannelPort?: number;
  /** vLLM NIXL prefill: tokens per KV block, for `remote_block_ids` (default 16). */
  blockSize?: number;
  /**
   * vLLM NIXL prefill: its one token ends the request (EOS or a stop string: finish_reason
   * "stop"), so the answer carries `kv_transfer_params: null` and no KV is held. Older vLLM's
   * `request_finished` gives params only to a FINISHED_LENGTH_CAPPED request (nixl_connector.py,
   * vllm-project/vllm 002a1057). Default false.
   */
  prefillStops?: boolean | ((body: OpenAiBody) => boolean);
}

/** What a P/D engine is, for configs and tests. */
export interface FakePdInfo {
  protocol: PdProtocol;
  role: PdRole;
  /** Prefill of vLLM Mooncake / SGLang: the bootstrap server's port; otherwise undefined. */
  bootstrapPort?: number;
  /**
   * How decodes address it: `http://127.0.0.1:port` (Mooncake) or `127.0.0.1:port` (SGLang); an
   * IPv6 host in brackets.
   */
  bootstrapAddr?: string;
  /** vLLM: engine id per data-parallel rank (what `/query` and `remote_engine_id` carry). */
  engineIds: string[];
  timeoutMs: number;
  strict: boolean;
  registry: PdRegistry;
}

/** The P/D side of one request as the engine saw it. */
export interface PdRequestRecord {
  protocol: PdProtocol;
  role: PdRole;
  /** The `X-Request-Id` header. */
  requestId?: string;
  /** `kv_transfer_params` as received (vLLM; undefined when absent). */
  kvTransferParams?: unknown;
  /** SGLang's fields as received; `room` keeps the exact digits of a JSON integer. */
  bootstrap?: { host?: unknown; port?: unknown; room?: unknown };
  /** vLLM Mooncake prefill: the `X-data-parallel-rank` header, parsed. */
  dataParallelRank?: number;
  /** The registry key this request published (prefill) or claimed (decode). */
  key?: string;
  /** vLLM prefill: the `kv_transfer_params` of its answer (null for Mooncake). */
  answeredKvTransferParams?: Record<string, unknown> | null;
  /** The other half: the prefill a decode took, or the decode that took an SGLang prefill. */
  matched?: { instanceId: string; seq: number; requestId?: string };
  /** Decode: prompt tokens received instead of prefilled. */
  transferredTokens?: number;
  /** Decode (and SGLang prefill): wall ms spent waiting for the other half. */
  waitedMs?: number;
  /** Unset while in flight, and for requests an injected failure ended before P/D handling. */
  outcome?: PdOutcome;
  /** Why a request was refused, degraded or failed. */
  error?: string;
}

export interface FakeEngineOptions {
  /** Instance id, echoed in `x-fake-engine` and passed to the hooks (default "engine-<port>"). */
  id?: string;
  flavour?: EngineFlavour;
  /** Served model name (default "fake-model"); other names get a 404 like vLLM's. */
  model?: string;
  /**
   * LoRA adapters served too, like vLLM's `--lora-modules` (their names are valid models, listed
   * in /v1/models with `parent`). `POST /v1/load_lora_adapter` and `/v1/unload_lora_adapter` change
   * them, as vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING.
   */
  loraModules?: string[];
  /** Port to bind (default 0: any free port). */
  port?: number;
  /** Address to listen on, "127.0.0.1" (default) or "::1"; the bootstrap server's too. */
  hostname?: string;
  /** Prefill-time coefficients in engine seconds (default: the Mooncake FAST'25 fit). */
  prefillModel?: PrefillModelCoefficients;
  /** Wall seconds per engine second (default 0.01: an 8k-token prefill takes ~10 ms). */
  timeScale?: number;
  /** Engine seconds per output token (default 0.02), scaled by `timeScale`. */
  decodeSecondsPerToken?: number;
  /** Prompt length in tokens (default: ~4 characters a token, token-id prompts counted exactly). */
  countTokens?: (body: OpenAiBody) => number | Promise<number>;
  /** Prompt tokens this instance holds, from token 0; asked when the prefill starts (default 0). */
  cachedTokens?: (body: OpenAiBody, instanceId: string) => number | Promise<number>;
  /** Called after each prefill, before the first token is sent (e.g. to write keys to a store). */
  onPrefilled?: (body: OpenAiBody, instanceId: string) => void | Promise<void>;
  /** Tokens to generate; at or above `max_tokens` the request ends with "length", else "stop". */
  completionTokens?: (body: OpenAiBody) => number;
  /** Text of output token `index` (default: words of a fixed sentence). */
  tokenText?: (index: number) => string;
  /** Start ready (default true); false answers 503 on /health and inference until setReady(true). */
  ready?: boolean;
  /** vLLM: emit `vllm:gpu_cache_usage_perc` instead of `vllm:kv_cache_usage_perc` (old builds). */
  oldNames?: boolean;
  /** SGLang: omit `num_pending_tokens` from /get_load (old builds). */
  omitPendingTokens?: boolean;
  /** Data-parallel ranks reported in /metrics (`engine` label) and /get_load (default 1). */
  dataParallelSize?: number;
  /** KV capacity in tokens, for the usage gauges (default 200 000). */
  kvCapacityTokens?: number;
  /** Report `usage.prompt_tokens_details.cached_tokens` (default true). */
  reportCachedTokens?: boolean;
  /**
   * The engine's own prefix cache (engine_kv_cache.ts): answers `cachedTokens` and is written
   * after each prefill, unless those hooks are given.
   */
  kvCache?: EngineKvCache;
  /** Default delay of `slow_first_byte`, wall ms (default 300). */
  slowFirstByteMs?: number;
  /** Request records kept (oldest dropped first; default 1000). */
  maxRecords?: number;
  /** Epoch milliseconds for records (default: performance.timeOrigin + performance.now()). */
  now?: () => number;
  /** Act as the prefill or decode instance of a P/D protocol (see `FakePdOptions`). */
  pd?: FakePdOptions;
  /**
   * The model's runner, as vLLM's `--runner`/task: which POST routes exist
   * (fake_utility_routes.ts; default "generate": completions, chat, tokenize, detokenize).
   */
  runner?: FakeRunner;
}

export interface FailureOptions {
  /** `slow_first_byte`: wall ms before the response starts (default: the engine's option). */
  delayMs?: number;
  /**
   * `hang`, `http500`, `http503`: also apply to /health, /metrics, /get_load and /v1/models
   * (default true: a broken process answers nothing well). `midstream` and `slow_first_byte`
   * only ever apply to inference.
   */
  allEndpoints?: boolean;
  /** Only these paths fail (default: all of them), e.g. `["/tokenize"]`. */
  paths?: string[];
}

/** One inference request as the engine saw it. */
export interface RequestRecord {
  seq: number;
  path: string;
  /** Every request header, lower-cased names. */
  headers: Record<string, string>;
  traceparent?: string;
  requestId?: string;
  body?: OpenAiBody;
  stream: boolean;
  arrivedAtMs: number;
  /** Response headers sent (streams send them before the prefill, as vLLM and SGLang do). */
  headersAtMs?: number;
  /** First body byte sent: after the prefill for a stream, at the end otherwise. */
  firstByteAtMs?: number;
  endedAtMs?: number;
  prefillStartedAtMs?: number;
  prefillEndedAtMs?: number;
  promptTokens?: number;
  cachedTokens?: number;
  completionTokens?: number;
  /** Failure mode in force when the request arrived. */
  failure: FailureMode;
  outcome?: RequestOutcome;
  /** P/D engines only: the protocol side of the request. */
  pd?: PdRequestRecord;
}

export interface FakeEngineStats {
  /** Inference requests in arrival order (bounded by `maxRecords`). */
  requests: RequestRecord[];
  /** Inference requests by how they ended. */
  byOutcome: Record<RequestOutcome, number>;
  /** Inference requests answered in full. */
  served: number;
  healthChecks: number;
  metricsScrapes: number;
  /** GET /v1/models answered. */
  modelListings: number;
  loadQueries: number;
  /** Hanging requests that ended because their client (the router) went away. */
  hungUntilClientLeft: number;
  /** Prompt tokens looked up in the prefix cache, and how many of them hit. */
  prefixCacheQueries: number;
  prefixCacheHits: number;
  /** P/D engines: requests by how their P/D part ended (all zero on other engines). */
  pdByOutcome: Record<PdOutcome, number>;
}

/** What the engine would report right now (also what /metrics and /get_load serve). */
export interface FakeEngineLoad {
  /** Requests queued for prefill, not started. */
  waiting: number;
  /** Requests prefilling (0 or 1) or decoding. */
  running: number;
  prefilling: number;
  decoding: number;
  /** SGLang's definition: full prompt tokens of queued requests plus the rest of the running prefill. */
  pendingPrefillTokens: number;
  /** Tokens held in KV by running requests. */
  kvUsedTokens: number;
}

export interface FakeEngine {
  readonly url: string;
  readonly port: number;
  readonly id: string;
  readonly flavour: EngineFlavour;
  readonly model: string;
  readonly stats: FakeEngineStats;
  readonly failure: FailureMode;
  readonly ready: boolean;
  /** The P/D role of this engine, if it has one. */
  readonly pd: FakePdInfo | undefined;
  /** Changes how new requests are treated; resolves once `refuse` stopped or restored listening. */
  setFailure(mode: FailureMode, options?: FailureOptions): Promise<void>;
  /** false: /health answers 503 and inference 503, as while an engine loads its weights. */
  setReady(ready: boolean): void;
  load(): FakeEngineLoad;
  /**
   * vLLM P/D: new engine ids, as after a restart (vLLM draws a fresh UUID per start unless
   * kv_transfer_config.engine_id is set); `/query` answers them from now on.
   */
  renewEngineIds(): void;
  /** Ends every request in flight and stops listening. Idempotent. */
  close(): Promise<void>;
}

const OUTCOMES: RequestOutcome[] = [
  "ok",
  "client_abort",
  "hang",
  "http500",
  "http503",
  "midstream",
  "stall",
  "not_ready",
  "bad_request",
  "not_found",
  "engine_closed",
  "kv_transfer_failed",
];

const PD_OUTCOMES: PdOutcome[] = [
  "ok",
  "invalid",
  "degraded",
  "plain",
  "no_prefill",
  "timeout",
  "mismatch",
  "prefill_dead",
  "duplicate",
  "unknown_bootstrap",
  "no_decode",
];

const WORDS = " The quick brown fox jumps over the lazy dog and keeps on running".split(/(?= )/);

const encoder = new TextEncoder();

class Aborted extends Error {
  constructor() {
    super("aborted");
  }
}

/** Waits until `performance.now()` reaches `targetMs`; rejects with Aborted when `signal` fires. */
function sleepUntil(targetMs: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(new Aborted());
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(new Aborted());
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, targetMs - performance.now()));
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * vLLM's (pydantic's) refusal of a message whose content is neither a string, null nor a list of
 * content-part objects: a 400, as the real engine answers.
 */
function messageContentProblem(messages: unknown[]): string | undefined {
  for (const [i, message] of messages.entries()) {
    const content = (message as { content?: unknown } | null)?.content;
    if (content === undefined || content === null || typeof content === "string") continue;
    const parts = Array.isArray(content) &&
      content.every((part) => part !== null && typeof part === "object" && !Array.isArray(part));
    if (!parts) return `messages.${i}.content: Input should be a valid string or list of parts`;
  }
  return undefined;
}

/** ~4 characters a token; token-id prompts are counted exactly. */
export function roughTokenCount(body: OpenAiBody): number {
  const chars = (value: unknown): number => {
    if (typeof value === "string") return Math.ceil(value.length / 4);
    if (Array.isArray(value)) {
      if (value.every((v) => typeof v === "number")) return value.length;
      return value.reduce((sum: number, v) => sum + chars(v), 0);
    }
    if (value && typeof value === "object" && "text" in value) {
      return chars((value as { text: unknown }).text);
    }
    return 0;
  };
  if (Array.isArray(body.messages)) {
    let total = 3;
    for (const message of body.messages) {
      total += 4 + chars((message as { content?: unknown })?.content);
    }
    return total;
  }
  if (body.input !== undefined) return Math.max(1, chars(body.input) + chars(body.instructions));
  return Math.max(1, chars(body.prompt));
}

interface PrefillJob {
  record: RequestRecord;
  body: OpenAiBody;
  promptTokens: number;
  rank: number;
  signal: AbortSignal;
  resolve: () => void;
  reject: (error: unknown) => void;
}

interface Current {
  job: PrefillJob;
  uncached: number;
  startMs: number;
  endMs: number;
}

class Engine implements FakeEngine {
  readonly id: string;
  readonly flavour: EngineFlavour;
  readonly model: string;
  readonly stats: FakeEngineStats;
  #port: number;
  readonly #hostname: string;
  #servers = new Set<Deno.HttpServer<Deno.NetAddr>>();
  #listening: Deno.HttpServer<Deno.NetAddr> | undefined;
  #failure: FailureMode = "none";
  #failureOptions: FailureOptions = {};
  #ready: boolean;
  #closed = false;
  readonly #life = new AbortController();
  /** Aborted when the failure mode leaves "hang": stuck requests are let go. */
  #hangRelease = new AbortController();
  readonly #opts:
    & Required<
      Omit<
        FakeEngineOptions,
        | "id"
        | "port"
        | "hostname"
        | "onPrefilled"
        | "completionTokens"
        | "flavour"
        | "model"
        | "pd"
        | "kvCache"
      >
    >
    & Pick<FakeEngineOptions, "onPrefilled" | "completionTokens">;
  #seq = 0;
  #queue: PrefillJob[] = [];
  #current: Current | undefined;
  #draining = false;
  #gpuFreeAt = 0;
  #decoding = new Map<number, { rank: number; kvTokens: number }>();
  /** P/D: decodes waiting for their prefill's KV (they count as waiting). */
  #pdWaiting = new Map<number, { rank: number }>();
  /** P/D: SGLang prefills holding their KV until their decode takes it (they count as running). */
  #pdHolding = new Map<number, { rank: number; kvTokens: number }>();
  #pd: PdState | undefined;
  /** Stored Responses API answers (this engine's memory only, as vLLM's). */
  readonly #responses = new ResponseStore();
  #startedAtS = Math.floor(Date.now() / 1000);

  constructor(options: FakeEngineOptions, server: Deno.HttpServer<Deno.NetAddr>) {
    this.#port = server.addr.port;
    this.#hostname = server.addr.hostname;
    this.id = options.id ?? `engine-${this.#port}`;
    this.flavour = options.flavour ?? (options.pd?.protocol === "sglang" ? "sglang" : "vllm");
    this.model = options.model ?? "fake-model";
    this.#ready = options.ready ?? true;
    this.#opts = {
      prefillModel: options.prefillModel ?? MOONCAKE_PREFILL_MODEL,
      timeScale: options.timeScale ?? 0.01,
      decodeSecondsPerToken: options.decodeSecondsPerToken ?? 0.02,
      countTokens: options.countTokens ?? roughTokenCount,
      cachedTokens: options.cachedTokens ??
        (options.kvCache ? (body) => options.kvCache!.cachedTokens(body) : () => 0),
      onPrefilled: options.onPrefilled ??
        (options.kvCache ? (body) => options.kvCache!.write(body) : undefined),
      completionTokens: options.completionTokens,
      tokenText: options.tokenText ?? ((i) => WORDS[i % WORDS.length]),
      ready: this.#ready,
      oldNames: options.oldNames ?? false,
      omitPendingTokens: options.omitPendingTokens ?? false,
      dataParallelSize: Math.max(1, Math.floor(options.dataParallelSize ?? 1)),
      kvCapacityTokens: options.kvCapacityTokens ?? 200_000,
      reportCachedTokens: options.reportCachedTokens ?? true,
      slowFirstByteMs: options.slowFirstByteMs ?? 300,
      maxRecords: options.maxRecords ?? 1000,
      loraModules: [...(options.loraModules ?? [])],
      runner: options.runner ?? "generate",
      now: options.now ?? (() => performance.timeOrigin + performance.now()),
    };
    this.stats = {
      requests: [],
      byOutcome: Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Record<RequestOutcome, number>,
      served: 0,
      healthChecks: 0,
      metricsScrapes: 0,
      modelListings: 0,
      loadQueries: 0,
      hungUntilClientLeft: 0,
      prefixCacheQueries: 0,
      prefixCacheHits: 0,
      pdByOutcome: Object.fromEntries(PD_OUTCOMES.map((o) => [o, 0])) as Record<PdOutcome, number>,
    };
    this.#adopt(server);
    if (options.pd) this.#pd = this.#startPd(options.pd);
  }

  get url(): string {
    return `http://${bracketed(this.#hostname)}:${this.#port}`;
  }
  get port(): number {
    return this.#port;
  }
  get failure(): FailureMode {
    return this.#failure;
  }
  get ready(): boolean {
    return this.#ready;
  }
  get pd(): FakePdInfo | undefined {
    const pd = this.#pd;
    if (!pd) return undefined;
    return {
      protocol: pd.protocol,
      role: pd.role,
      bootstrapPort: pd.bootstrap?.port,
      bootstrapAddr: pd.bootstrap?.addr,
      engineIds: [...pd.engineIds],
      timeoutMs: pd.timeoutMs,
      strict: pd.strict,
      registry: pd.registry,
    };
  }

  setReady(ready: boolean): void {
    this.#ready = ready;
  }

  async setFailure(mode: FailureMode, options: FailureOptions = {}): Promise<void> {
    if (this.#closed) throw new Error(`fake engine ${this.id} is closed: start a new one`);
    if (this.#failure === "hang" && mode !== "hang") {
      this.#hangRelease.abort();
      this.#hangRelease = new AbortController();
    }
    this.#failure = mode;
    this.#failureOptions = options;
    if (mode === "refuse") {
      const server = this.#listening;
      this.#listening = undefined;
      // Graceful: the listener closes at once, requests in flight may finish.
      if (server) await Promise.race([server.shutdown(), Promise.resolve()]);
      // The bootstrap server lives in the same process: it goes too.
      const bootstrap = this.#pd?.bootstrap;
      const listener = bootstrap?.server;
      if (bootstrap) bootstrap.server = undefined;
      if (listener) await listener.shutdown();
    } else {
      if (!this.#listening) {
        this.#adopt(Engine.listen(this.#hostname, this.#port, (r) => this.#handle(r)));
      }
      const bootstrap = this.#pd?.bootstrap;
      if (bootstrap && !bootstrap.server) {
        bootstrap.server = Engine.listen(
          this.#hostname,
          bootstrap.port,
          (r) => this.#bootstrapHandle(r),
        );
      }
    }
  }

  load(): FakeEngineLoad {
    const total = { waiting: 0, running: 0, pending: 0, kv: 0 };
    for (const rank of this.#perRank()) {
      total.waiting += rank.waiting;
      total.running += rank.running;
      total.pending += rank.pending;
      total.kv += rank.kv;
    }
    return {
      waiting: total.waiting,
      running: total.running,
      prefilling: this.#current ? 1 : 0,
      decoding: this.#decoding.size,
      pendingPrefillTokens: total.pending,
      kvUsedTokens: total.kv,
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#life.abort();
    for (const job of this.#queue.splice(0)) job.reject(new Aborted());
    this.#listening = undefined;
    const bootstrap = this.#pd?.bootstrap;
    bootstrap?.unregister();
    const listener = bootstrap?.server;
    if (bootstrap) bootstrap.server = undefined;
    await Promise.all([...[...this.#servers].map((s) => s.shutdown()), listener?.shutdown()]);
  }

  static listen(
    hostname: string,
    port: number,
    handler: (request: Request) => Promise<Response>,
  ): Deno.HttpServer<Deno.NetAddr> {
    return Deno.serve({ hostname, port, onListen() {} }, handler);
  }

  /** Binds the request handler to a server created before the engine existed. */
  static create(options: FakeEngineOptions): Engine {
    if (options.pd) checkPdOptions(options);
    const box: { engine?: Engine } = {};
    const server = Engine.listen(
      options.hostname ?? "127.0.0.1",
      options.port ?? 0,
      (request) => box.engine!.#handle(request),
    );
    box.engine = new Engine(options, server);
    return box.engine;
  }

  #adopt(server: Deno.HttpServer<Deno.NetAddr>): void {
    this.#port = server.addr.port;
    this.#listening = server;
    this.#servers.add(server);
    server.finished.then(() => this.#servers.delete(server));
  }

  // ---- HTTP -------------------------------------------------------------------------------

  async #handle(request: Request): Promise<Response> {
    const path = new URL(request.url).pathname;
    if (path.startsWith("/v1/responses/") && this.#opts.runner === "generate") {
      return this.#storedResponse(path, request.method);
    }
    if (request.method === "POST" && path.endsWith("_lora_adapter")) {
      return await this.#loraAdapter(request, path);
    }
    if (request.method === "POST" && AUDIO_PATHS.includes(path)) {
      if (servesRoute(this.#opts.runner, path)) return await this.#audio(request, path);
    }
    const sglangOnly = path === "/generate" && this.flavour !== "sglang";
    if (request.method === "POST" && servesRoute(this.#opts.runner, path) && !sglangOnly) {
      return await this.#inference(request, path);
    }
    if (request.method !== "GET") return this.#json(404, { detail: "Not Found" });
    const failure = this.#failureOn(path);
    if (this.#failureOptions.allEndpoints !== false) {
      if (failure === "hang") return await this.#hang(request);
      if (failure === "http500") {
        return this.#error(500, "Internal server error", "InternalServerError");
      }
      if (failure === "http503") {
        return this.#error(503, "Service unavailable", "ServiceUnavailableError");
      }
    }
    switch (path) {
      case "/health":
      case "/health_generate":
        this.stats.healthChecks++;
        return this.#plain(this.#ready ? 200 : 503, "");
      case "/v1/models":
        this.stats.modelListings++;
        return this.#json(200, {
          object: "list",
          data: [this.model, ...this.#opts.loraModules].map((id, i) => ({
            id,
            object: "model",
            created: this.#startedAtS,
            owned_by: this.flavour,
            root: i === 0 ? this.model : `/adapters/${id}`,
            parent: i === 0 ? null : this.model,
          })),
        });
      case "/metrics":
        this.stats.metricsScrapes++;
        return this.#plain(
          200,
          this.flavour === "vllm" ? this.#vllmMetrics() : this.#sglangMetrics(),
          "text/plain; version=0.0.4; charset=utf-8",
        );
      case "/get_load":
        if (this.flavour !== "sglang") break;
        this.stats.loadQueries++;
        return this.#json(200, this.#sglangLoad());
    }
    return this.#json(404, { detail: "Not Found" });
  }

  #headers(extra: Record<string, string> = {}): Headers {
    const headers = new Headers(extra);
    headers.set("x-fake-engine", this.id);
    headers.set("server", "uvicorn"); // as vLLM and SGLang answer (their HTTP servers' banner)
    return headers;
  }

  #plain(status: number, text: string, contentType = "text/plain; charset=utf-8"): Response {
    return new Response(text, { status, headers: this.#headers({ "content-type": contentType }) });
  }

  #json(status: number, value: unknown, extra: Record<string, string> = {}): Response {
    return new Response(JSON.stringify(value), {
      status,
      headers: this.#headers({ "content-type": "application/json", ...extra }),
    });
  }

  /** OpenAI's error shape, as recent vLLM and SGLang send it. */
  #error(status: number, message: string, type: string, param: string | null = null): Response {
    return this.#json(status, { error: { message, type, param, code: status } });
  }

  /** Sends nothing until the client goes away, the mode leaves "hang" or the engine closes. */
  async #hang(request: Request): Promise<Response> {
    const signal = AbortSignal.any([request.signal, this.#life.signal, this.#hangRelease.signal]);
    await new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      signal.addEventListener("abort", () => resolve(), { once: true });
    });
    if (signal.reason === request.signal.reason) this.stats.hungUntilClientLeft++;
    // The client is gone (or the engine closing): whatever we send is never read.
    return new Response(null, { status: 503, headers: this.#headers() });
  }

  /** The failure mode a POST to `path` meets. */
  #failureOn(path: string): FailureMode {
    const paths = this.#failureOptions.paths;
    return paths && !paths.includes(path) ? "none" : this.#failure;
  }

  /** What vLLM refuses of a Responses body: no `input` (400), an unknown previous response (404). */
  #responsesRefusal(body: OpenAiBody): Response | undefined {
    if (typeof body.input !== "string" && !Array.isArray(body.input)) {
      return this.#error(400, "input: Field required", "BadRequestError", "input");
    }
    const previous = body.previous_response_id;
    if (typeof previous === "string" && !this.#responses.get(previous)) {
      return this.#json(404, responseNotFound(previous));
    }
    return undefined;
  }

  /** GET /v1/responses/{id} and POST .../cancel on this engine's stored responses. */
  #storedResponse(path: string, method: string): Response {
    const match = /^\/v1\/responses\/([^/]+)(\/cancel)?$/.exec(path)!;
    const id = decodeURIComponent(match[1]);
    const stored = this.#responses.get(id);
    if (!stored) return this.#json(404, responseNotFound(id));
    if (!match[2]) return this.#json(200, stored);
    if (method !== "POST") return this.#json(405, { detail: "Method Not Allowed" });
    if (stored.status !== "queued" && stored.status !== "in_progress") {
      return this.#error(
        400,
        "Cannot cancel a synchronous response.",
        "invalid_request_error",
        "response_id",
      );
    }
    stored.status = "cancelled";
    return this.#json(200, stored);
  }

  /** vLLM's runtime LoRA routes: load (400 when already loaded) and unload (404 when absent). */
  async #loraAdapter(request: Request, path: string): Promise<Response> {
    const body = await request.json().catch(() => ({})) as { lora_name?: unknown };
    const name = body.lora_name;
    if (typeof name !== "string") {
      return this.#error(400, "lora_name: Field required", "BadRequestError");
    }
    const loaded = this.#opts.loraModules;
    if (path === "/v1/load_lora_adapter") {
      if (loaded.includes(name)) {
        return this.#error(
          400,
          `The lora adapter '${name}' has already been loaded.`,
          "BadRequestError",
        );
      }
      loaded.push(name);
      return this.#plain(200, `Success: LoRA adapter '${name}' added successfully.`);
    }
    if (!loaded.includes(name)) {
      return this.#error(404, `The lora adapter '${name}' cannot be found.`, "NotFoundError");
    }
    loaded.splice(loaded.indexOf(name), 1);
    return this.#plain(200, `Success: LoRA adapter '${name}' removed successfully.`);
  }

  /** An audio upload: read whole (as vLLM's form parser does) and answered at once. */
  async #audio(request: Request, path: string): Promise<Response> {
    const record = this.#record(request, path);
    if (record.failure === "http500") {
      this.#finish(record, "http500");
      return this.#error(500, "Internal server error (injected)", "InternalServerError");
    }
    const answer = await audioAnswer(request, this.model);
    record.body = answer.received;
    this.#finish(record, answer.status === 200 ? "ok" : "bad_request");
    return new Response(answer.body, {
      status: answer.status,
      headers: this.#headers({ "content-type": answer.contentType }),
    });
  }

  /** A pooling or utility route: answered at once (no prefill queue: these are rare and small). */
  #utility(
    record: RequestRecord,
    path: string,
    body: OpenAiBody,
    echo: Record<string, string>,
  ): Response {
    const answer = utilityAnswer(path, body as Record<string, unknown>, this.model);
    record.promptTokens = answer.promptTokens;
    this.#finish(record, answer.status === 200 ? "ok" : "bad_request");
    return this.#json(answer.status, answer.body, echo);
  }

  #finish(record: RequestRecord, outcome: RequestOutcome): void {
    if (record.outcome) return;
    record.outcome = outcome;
    record.endedAtMs = this.#opts.now();
    this.stats.byOutcome[outcome]++;
    if (outcome === "ok") this.stats.served++;
  }

  /** The record of a request as it arrives, kept among the last `maxRecords`. */
  #record(request: Request, path: string): RequestRecord {
    const headers: Record<string, string> = {};
    request.headers.forEach((value, name) => (headers[name] = value));
    const record: RequestRecord = {
      seq: this.#seq++,
      path,
      headers,
      traceparent: headers["traceparent"],
      requestId: headers["x-request-id"],
      stream: false,
      arrivedAtMs: this.#opts.now(),
      failure: this.#failureOn(path),
    };
    this.stats.requests.push(record);
    if (this.stats.requests.length > this.#opts.maxRecords) this.stats.requests.shift();
    return record;
  }

  async #inference(request: Request, path: string): Promise<Response> {
    const record = this.#record(request, path);
    const { failure } = record;
    const echo: Record<string, string> = record.requestId
      ? { "x-request-id": record.requestId }
      : {};

    // The body is read first so that every record carries it, whatever happens next.
    let body: OpenAiBody | undefined;
    let bodyError: string | undefined;
    let roomSource: string | undefined;
    try {
      const parsed = parseBody(await request.text(), this.#pd?.protocol === "sglang");
      const value = parsed.value;
      if (value && typeof value === "object" && !Array.isArray(value)) {
        body = value as OpenAiBody;
        roomSource = parsed.roomSource;
      } else bodyError = "The request body must be a JSON object.";
    } catch {
      bodyError = "The request body is not valid JSON.";
    }
    record.body = body;
    record.stream = body?.stream === true;
    const pd = this.#pd;
    if (pd) {
      record.pd = { protocol: pd.protocol, role: pd.role, requestId: record.requestId };
      if (pd.protocol === "sglang") {
        record.pd.bootstrap = {
          host: body?.bootstrap_host,
          port: body?.bootstrap_port,
          room: typeof body?.bootstrap_room === "number" || Array.isArray(body?.bootstrap_room)
            ? roomSource
            : body?.bootstrap_room,
        };
      } else record.pd.kvTransferParams = body?.kv_transfer_params;
    }

    if (failure === "hang") {
      this.#finish(record, "hang");
      return await this.#hang(request);
    }
    if (failure === "http500") {
      this.#finish(record, "http500");
      return this.#error(500, "Internal server error (injected)", "InternalServerError");
    }
    if (failure === "http503") {
      this.#finish(record, "http503");
      return this.#error(503, "Service unavailable (injected)", "ServiceUnavailableError");
    }
    if (!this.#ready) {
      this.#finish(record, "not_ready");
      return this.#error(503, "The engine is starting; retry later.", "ServiceUnavailableError");
    }
    if (failure === "slow_first_byte") {
      const delay = this.#failureOptions.delayMs ?? this.#opts.slowFirstByteMs;
      try {
        await sleepUntil(
          performance.now() + delay,
          AbortSignal.any([request.signal, this.#life.signal]),
        );
      } catch {
        this.#finish(record, this.#closed ? "engine_closed" : "client_abort");
        return new Response(null, { status: 499, headers: this.#headers() });
      }
    }

    if (!body) {
      this.#finish(record, "bad_request");
      if (record.pd) this.#pdOutcome(record, "invalid", bodyError);
      return this.#error(400, bodyError!, "BadRequestError");
    }
    const generate = path === "/generate";
    if (generate) {
      const refusal = generateRefusal(body);
      if (refusal) {
        this.#finish(record, "bad_request");
        if (record.pd) this.#pdOutcome(record, "invalid", refusal);
        return this.#json(400, { error: { message: refusal } });
      }
      body = generateView(body);
    }
    const anthropic = path === "/v1/messages";
    const responses = path === "/v1/responses";
    const chat = path === "/v1/chat/completions" || anthropic || responses;
    if (responses) {
      const refused = this.#responsesRefusal(body);
      if (refused) {
        this.#finish(record, refused.status === 404 ? "not_found" : "bad_request");
        return refused;
      }
    }
    if (anthropic && !Number.isInteger(body.max_tokens)) {
      this.#finish(record, "bad_request");
      return this.#json(400, anthropicEngineError("max_tokens: Field required", "BadRequestError"));
    }
    if (
      !generate && typeof body.model === "string" && body.model !== this.model &&
      !this.#opts.loraModules.includes(body.model)
    ) {
      this.#finish(record, "not_found");
      if (anthropic) {
        const message = `The model \`${body.model}\` does not exist.`;
        return this.#json(404, anthropicEngineError(message, "NotFoundError"));
      }
      return this.#error(
        404,
        `The model \`${body.model}\` does not exist.`,
        "NotFoundError",
        "model",
      );
    }
    if (isUtilityPath(path)) return this.#utility(record, path, body, echo);
    if (!responses && (chat ? !Array.isArray(body.messages) : body.prompt === undefined)) {
      this.#finish(record, "bad_request");
      return this.#error(
        400,
        chat ? "`messages` is required." : "`prompt` is required.",
        "BadRequestError",
        chat ? "messages" : "prompt",
      );
    }
    const contentProblem = chat && !responses
      ? messageContentProblem(body.messages as unknown[])
      : undefined;
    if (contentProblem) {
      this.#finish(record, "bad_request");
      return this.#error(400, contentProblem, "BadRequestError", "messages");
    }
    const maxTokens = Number(
      body.max_completion_tokens ?? body.max_tokens ?? body.max_output_tokens ?? 16,
    );
    if (!Number.isInteger(maxTokens) || maxTokens < 1) {
      this.#finish(record, "bad_request");
      if (record.pd) this.#pdOutcome(record, "invalid", "`max_tokens` must be a positive integer.");
      return this.#error(400, "`max_tokens` must be a positive integer.", "BadRequestError");
    }
    const plan = this.#pdPlan(record, body, roomSource);
    if (plan instanceof Response) return plan;
    let promptTokens: number;
    try {
      promptTokens = Math.max(0, Math.round(await this.#opts.countTokens(body)));
    } catch (e) {
      this.#finish(record, "http500");
      return this.#error(500, `fake engine countTokens hook failed: ${e}`, "InternalServerError");
    }
    record.promptTokens = promptTokens;
    const wanted = this.#opts.completionTokens?.(body) ?? maxTokens;
    // A P/D prefill produces one token (vLLM: max_tokens 1; SGLang: the token it hands over).
    const limit = plan?.role === "prefill" ? 1 : maxTokens;
    const outputTokens = Math.max(1, Math.min(limit, Math.round(wanted)));
    const stopped = this.#prefillStops(plan, body);
    const finishReason = outputTokens >= limit && !stopped ? "length" : "stop";
    const reply: Reply = {
      record,
      body,
      chat,
      anthropic,
      responses,
      promptTokens,
      outputTokens,
      finishReason,
      rank: this.#rankOf(record),
      id: responses
        ? `resp_${crypto.randomUUID().replaceAll("-", "")}`
        : `${chat ? "chatcmpl" : "cmpl"}-${crypto.randomUUID().replaceAll("-", "")}`,
      created: Math.floor(Date.now() / 1000),
      includeUsage: (body.stream_options as { include_usage?: unknown } | undefined)
        ?.include_usage === true,
      midstream: failure === "midstream" || failure === "midline",
      midline: failure === "midline",
      stall: failure === "stall",
      pd: plan,
      kvTransferParams: null,
    };
    if (generate) {
      // The view's `prompt` is the body's text or ids: the same count as a P/D batch's.
      const items = sglangBatchItems(body);
      reply.generate = { rids: generateRids(body, items), batch: items !== undefined };
    }
    return record.stream ? this.#stream(reply, echo) : await this.#whole(request, reply, echo);
  }

  // ---- P/D -----------------------------------------------------------------------------------

  /** The request's P/D plan (undefined: ordinary, degraded or plain), or the refusal to send. */
  #pdPlan(
    record: RequestRecord,
    body: OpenAiBody,
    roomSource: string | undefined,
  ): PdPlan | Response | undefined {
    const pd = this.#pd;
    if (!pd || !record.pd) return undefined;
    const check = checkPdRequest({
      protocol: pd.protocol,
      role: pd.role,
      body,
      headers: record.headers,
      roomSource,
      strict: pd.strict,
      dataParallelSize: this.#opts.dataParallelSize,
    });
    if (check.kind === "reject") {
      this.#finish(record, "bad_request");
      this.#pdOutcome(record, "invalid", check.message);
      return this.#error(check.status, check.message, "BadRequestError", check.param);
    }
    if (check.kind !== "plan") {
      this.#pdOutcome(record, check.kind === "plain" ? "plain" : "degraded", check.reason);
      return undefined;
    }
    if (check.plan.protocol === "vllm-mooncake" && check.plan.role === "prefill") {
      record.pd.dataParallelRank = check.plan.dpRank;
    }
    return check.plan;
  }

  /**
   * The DP rank serving the request: vLLM's `X-data-parallel-rank` header (any request, serving.py
   * `_get_data_parallel_rank`) when in range, else the engines in turn (vLLM balances by load).
   */
  #rankOf(record: RequestRecord): number {
    const size = this.#opts.dataParallelSize;
    const pinned = this.flavour === "vllm"
      ? dataParallelRankHeader(record.headers["x-data-parallel-rank"])
      : undefined;
    return pinned !== undefined && pinned < size ? pinned : record.seq % size;
  }

  /** A NIXL prefill whose one token ends the request (the `prefillStops` option). */
  #prefillStops(plan: PdPlan | undefined, body: OpenAiBody): boolean {
    if (plan?.protocol !== "vllm-nixl" || plan.role !== "prefill") return false;
    const stops = this.#pd!.prefillStops;
    return typeof stops === "function" ? stops(body) : stops;
  }

  #startPd(options: FakePdOptions): PdState {
    const timeScale = this.#opts.timeScale;
    const registry = options.registry ?? defaultPdRegistry;
    const engineIds = options.protocol === "sglang"
      ? []
      : rankEngineIds(options.engineId ?? crypto.randomUUID(), this.#opts.dataParallelSize);
    const state: PdState = {
      protocol: options.protocol,
      role: options.role,
      registry,
      strict: options.strict ?? true,
      timeoutMs: options.timeoutMs ??
        Math.max(2000, UPSTREAM_TIMEOUT_S[options.protocol] * timeScale * 1000),
      heartbeatMs: Math.max(10, SGLANG_HEARTBEAT_S * timeScale * 1000),
      transferSecondsPerToken: options.transferSecondsPerToken ??
        DEFAULT_TTFT_PARAMS.kvBytesPerToken / DEFAULT_TTFT_PARAMS.transferBytesPerS,
      engineIds,
      sideChannelPort: options.sideChannelPort ?? 5600,
      blockSize: Math.max(1, Math.floor(options.blockSize ?? 16)),
      nextBlock: 1,
      prefillStops: options.prefillStops ?? false,
    };
    if (options.role === "prefill" && options.protocol !== "vllm-nixl") {
      state.bootstrap = this.#startBootstrap(state, options.bootstrapPort ?? 0);
    }
    return state;
  }

  /** The bootstrap server of a Mooncake or SGLang prefill, reachable in the registry. */
  #startBootstrap(state: PdState, wantedPort: number): NonNullable<PdState["bootstrap"]> {
    const server = Engine.listen(this.#hostname, wantedPort, (r) => this.#bootstrapHandle(r));
    const port = server.addr.port;
    const host = bracketed(this.#hostname);
    const mooncake = state.protocol === "vllm-mooncake";
    const addr = mooncake ? `http://${host}:${port}` : `${host}:${port}`;
    // The registry meets by the normalized address decodes name ("[::1]" is "127.0.0.1").
    const key = mooncake ? parseBootstrapAddr(addr)! : `${normalizeHost(this.#hostname)}:${port}`;
    const unregister = state.registry.registerBootstrap({
      addr: key,
      instanceId: this.id,
      engineIds: state.engineIds,
      alive: () => this.#pdAlive(),
    });
    return { port, addr, key, server, unregister };
  }

  renewEngineIds(): void {
    const ids = this.#pd?.engineIds;
    // In place: the registry's bootstrap entry holds the same list.
    if (ids?.length) ids.splice(0, ids.length, ...rankEngineIds(crypto.randomUUID(), ids.length));
  }

  /** Whether this engine's process could still hand over KV. */
  #pdAlive(): boolean {
    return !this.#closed && this.#failure !== "refuse" && this.#failure !== "hang";
  }

  /** The bootstrap server of a vLLM Mooncake or SGLang prefill. */
  async #bootstrapHandle(request: Request): Promise<Response> {
    const path = new URL(request.url).pathname;
    const failure = this.#failure;
    if (this.#failureOptions.allEndpoints !== false) {
      if (failure === "hang") return await this.#hang(request);
      if (failure === "http500") return this.#plain(500, "Internal Server Error");
      if (failure === "http503") return this.#plain(503, "Service Unavailable");
    }
    const pd = this.#pd!;
    if (pd.protocol === "vllm-mooncake" && request.method === "GET" && path === "/query") {
      // MooncakeBootstrapServer: {dp_rank: {engine_id, worker_addr: {tp_rank: {pp_rank: addr}}}}.
      return this.#json(
        200,
        Object.fromEntries(pd.engineIds.map((engineId, rank) => [String(rank), {
          engine_id: engineId,
          worker_addr: { "0": { "0": `tcp://127.0.0.1:${pd.sideChannelPort + rank}` } },
        }])),
      );
    }
    if (pd.protocol === "sglang" && request.method === "GET" && path === "/health") {
      return this.#plain(200, "OK");
    }
    return this.#json(404, { detail: "Not Found" });
  }

  #pdOutcome(record: RequestRecord, outcome: PdOutcome, error?: string): void {
    if (!record.pd || record.pd.outcome) return;
    record.pd.outcome = outcome;
    if (error !== undefined) record.pd.error = error;
    this.stats.pdByOutcome[outcome]++;
  }

  /** Records a failed hand-over and returns the message the real engine answers. */
  #pdFailed(reply: Reply, error: PdTransferError): string {
    const { record } = reply;
    this.#pdOutcome(record, error.failure, error.message);
    this.#finish(record, "kv_transfer_failed");
    const plan = reply.pd;
    if (plan?.protocol !== "sglang") return "Internal server error"; // vLLM's GenerationError
    const what = plan.role === "decode" ? "Decode transfer failed" : "Prefill transfer failed";
    return `${what} for request rank=0 rid='${reply.id}' bootstrap_room=${plan.room} with ` +
      `exception KVTransferError(bootstrap_room=${plan.room}): ${error.message}`;
  }

  /** Prefill role, after the prefill: publish the KV (SGLang: and wait for the decode). */
  async #pdSend(reply: Reply, signal: AbortSignal): Promise<void> {
    const pd = this.#pd!;
    const plan = reply.pd!;
    const { record } = reply;
    const side: PdPrefillSide = {
      instanceId: this.id,
      seq: record.seq,
      requestId: record.requestId,
      promptTokens: reply.promptTokens,
      cachedTokens: record.cachedTokens ?? 0,
      alive: () => this.#pdAlive(),
    };
    if (plan.protocol === "vllm-nixl" && reply.finishReason === "stop") {
      // Not FINISHED_LENGTH_CAPPED: `request_finished` returns no params and frees the blocks.
      record.pd!.answeredKvTransferParams = null;
      this.#pdOutcome(record, "ok");
      return;
    }
    if (plan.protocol === "vllm-nixl") {
      const engineId = pd.engineIds[reply.rank];
      // vLLM's internal request id: "cmpl-<X-Request-Id>-0-<8 hex>" ("chatcmpl-...-<8 hex>").
      const base = record.requestId ?? crypto.randomUUID().replaceAll("-", "");
      const suffix = crypto.randomUUID().replaceAll("-", "").slice(0, 8);
      const remoteRequestId = reply.chat
        ? `chatcmpl-${base}-${suffix}`
        : `cmpl-${base}-0-${suffix}`;
      const count = Math.ceil(reply.promptTokens / pd.blockSize);
      const blocks = Array.from({ length: count }, (_v, i) => pd.nextBlock + i);
      pd.nextBlock += count;
      const answered: Record<string, unknown> = {
        do_remote_prefill: true,
        do_remote_decode: false,
        remote_block_ids: [blocks], // one list per KV-cache group (HMA builds)
        remote_engine_id: engineId,
        remote_request_id: remoteRequestId,
        remote_host: "127.0.0.1",
        remote_port: pd.sideChannelPort + reply.rank,
        tp_size: 1,
        dcp_size: 1,
        pp_size: 1,
        remote_num_tokens: reply.promptTokens,
        remote_blocks_expiry_time: null,
        transfer_mode: "pull",
        // vLLM 0.32 adds the prefill's own prefix-cache hits (scheduler.py `_update_from_output`),
        // which the decode reports as its `cached_tokens` instead of the transfer's ~100%.
        remote_prefill_cached_tokens: record.cachedTokens ?? 0,
      };
      side.answered = answered;
      const key = nixlKey(engineId, remoteRequestId);
      record.pd!.key = key;
      pd.registry.publish(key, side, pd.timeoutMs);
      reply.kvTransferParams = answered;
      record.pd!.answeredKvTransferParams = answered;
      this.#pdOutcome(record, "ok");
      return;
    }
    if (plan.protocol === "vllm-mooncake") {
      const key = mooncakeKey(pd.bootstrap!.key, plan.transferId);
      side.engineId = pd.engineIds[reply.rank];
      side.dpRank = reply.rank;
      record.pd!.key = key;
      record.pd!.answeredKvTransferParams = null; // request_finished returns no params
      pd.registry.publish(key, side, pd.timeoutMs);
      this.#pdOutcome(record, "ok");
      return;
    }
    if (plan.protocol !== "sglang") return;
    const key = sglangKey(pd.bootstrap!.key, plan.room);
    record.pd!.key = key;
    const publication = pd.registry.publish(key, side, pd.timeoutMs);
    const started = performance.now();
    this.#pdHolding.set(record.seq, { rank: reply.rank, kvTokens: reply.promptTokens });
    try {
      const decode = await publication.decode(pd.timeoutMs, signal);
      record.pd!.matched = {
        instanceId: decode.instanceId,
        seq: decode.seq,
        requestId: decode.requestId,
      };
      this.#pdOutcome(record, "ok");
    } catch (error) {
      if (!(error instanceof PdTransferError) && signal.aborted) throw new Aborted();
      throw error;
    } finally {
      this.#pdHolding.delete(record.seq);
      record.pd!.waitedMs = performance.now() - started;
    }
  }

  /** Decode role: take the prefill's KV (waiting for it, concurrent protocols), then transfer. */
  async #pdReceive(reply: Reply, signal: AbortSignal): Promise<void> {
    const pd = this.#pd!;
    const plan = reply.pd!;
    const { record } = reply;
    const side: PdDecodeSide = {
      instanceId: this.id,
      seq: record.seq,
      requestId: record.requestId,
      promptTokens: reply.promptTokens,
    };
    const samePrompt = (prefill: PdPrefillSide) =>
      prefill.promptTokens === reply.promptTokens ? undefined : (
        `the prefill ${prefill.instanceId} request ${prefill.seq} had ${prefill.promptTokens} ` +
        `prompt tokens, this decode has ${reply.promptTokens}`
      );
    let key: string;
    let timeoutMs = pd.timeoutMs;
    let verify = samePrompt;
    let heartbeat: { alive(): boolean; intervalMs: number; maxFailures: number } | undefined;
    if (plan.protocol === "vllm-nixl" && plan.role === "decode") {
      key = nixlKey(plan.remoteEngineId, plan.remoteRequestId);
      timeoutMs = 0; // serial: the prefill has answered before the decode is sent
      verify = (prefill) => {
        const answered = prefill.answered ?? {};
        for (const field of ["remote_host", "remote_port", "remote_block_ids", "tp_size"]) {
          if (JSON.stringify(answered[field]) !== JSON.stringify(plan.params[field])) {
            return `kv_transfer_params.${field} is ${JSON.stringify(plan.params[field])}, the ` +
              `prefill answered ${JSON.stringify(answered[field])}`;
          }
        }
        return samePrompt(prefill);
      };
    } else if (plan.protocol === "vllm-mooncake" && plan.role === "decode") {
      const server = pd.registry.bootstrap(plan.bootstrapAddr);
      if (!server) {
        throw new PdTransferError(
          "unknown_bootstrap",
          `Failed to connect to bootstrap server ${plan.bootstrapAddr}`,
        );
      }
      if (!server.engineIds.includes(plan.remoteEngineId)) {
        throw new PdTransferError(
          "mismatch",
          `Failed to find remote engine_id ${plan.remoteEngineId} from bootstrap server ` +
            plan.bootstrapAddr,
        );
      }
      key = mooncakeKey(plan.bootstrapAddr, plan.transferId);
      verify = (prefill) =>
        sameEngine(prefill, plan.remoteEngineId, server.engineIds) ??
          samePrompt(prefill);
    } else if (plan.protocol === "sglang" && plan.role === "decode") {
      const addr = plan.bootstrapHostPort;
      if (!pd.registry.bootstrap(addr)) {
        throw new PdTransferError(
          "unknown_bootstrap",
          `Failed to get prefill server info from bootstrap server ${addr}`,
        );
      }
      key = sglangKey(addr, plan.room);
      heartbeat = {
        alive: () => pd.registry.bootstrap(addr) !== undefined,
        intervalMs: pd.heartbeatMs,
        maxFailures: SGLANG_HEARTBEAT_MAX_FAILURES,
      };
    } else return;
    record.pd!.key = key;
    const started = performance.now();
    this.#pdWaiting.set(record.seq, { rank: reply.rank });
    let prefill: PdPrefillSide;
    try {
      prefill = await pd.registry.claim(key, side, { timeoutMs, signal, heartbeat, verify });
    } catch (error) {
      if (!(error instanceof PdTransferError) && signal.aborted) throw new Aborted();
      throw error;
    } finally {
      this.#pdWaiting.delete(record.seq);
      record.pd!.waitedMs = performance.now() - started;
    }
    record.pd!.matched = {
      instanceId: prefill.instanceId,
      seq: prefill.seq,
      requestId: prefill.requestId,
    };
    this.#pdOutcome(record, "ok");
    // The KV transfer replaces the prefill: no prefix-cache lookup, no prefill time.
    record.pd!.transferredTokens = reply.promptTokens;
    record.cachedTokens = decodeCachedTokens(plan.protocol, record, prefill, reply.promptTokens);
    record.prefillStartedAtMs = this.#opts.now();
    const ms = reply.promptTokens * pd.transferSecondsPerToken * this.#opts.timeScale * 1000;
    this.#pdWaiting.set(record.seq, { rank: reply.rank });
    try {
      await sleepUntil(performance.now() + ms, signal);
    } finally {
      this.#pdWaiting.delete(record.seq);
    }
    record.prefillEndedAtMs = this.#opts.now();
  }

  // ---- work: prefill queue and decode -------------------------------------------------------

  /** Queues the prefill (FIFO, one at a time) and resolves when it is done. */
  #prefill(reply: Reply, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queue.push({
        record: reply.record,
        body: reply.body,
        promptTokens: reply.promptTokens,
        rank: reply.rank,
        signal,
        resolve,
        reject,
      });
      this.#drain();
    });
  }

  async #drain(): Promise<void> {
    if (this.#draining) return;
    this.#draining = true;
    try {
      while (this.#queue.length > 0 && !this.#closed) {
        // The job stays queued (and counted as waiting) while its cache lookup runs.
        const job = this.#queue[0];
        if (job.signal.aborted) {
          this.#queue.shift();
          job.reject(new Aborted());
          continue;
        }
        let cached: number;
        try {
          const asked = await this.#opts.cachedTokens(job.body, this.id);
          cached = Math.max(0, Math.min(job.promptTokens, Math.round(Number(asked) || 0)));
        } catch (error) {
          if (this.#queue[0] === job) this.#queue.shift();
          job.reject(error);
          continue;
        }
        if (this.#queue[0] !== job) continue; // closed meanwhile: already rejected
        this.#queue.shift();
        try {
          const uncached = job.promptTokens - cached;
          this.stats.prefixCacheQueries += job.promptTokens;
          this.stats.prefixCacheHits += cached;
          const ms = prefillSeconds(uncached, cached, this.#opts.prefillModel) *
            this.#opts.timeScale * 1000;
          // A virtual GPU clock keeps back-to-back prefills from accumulating timer lateness.
          const startMs = Math.max(performance.now(), this.#gpuFreeAt);
          const endMs = startMs + ms;
          this.#current = { job, uncached, startMs, endMs };
          job.record.cachedTokens = cached;
          job.record.prefillStartedAtMs = this.#opts.now();
          await sleepUntil(endMs, job.signal);
          this.#gpuFreeAt = endMs;
          job.record.prefillEndedAtMs = this.#opts.now();
          await this.#opts.onPrefilled?.(job.body, this.id);
          job.resolve();
        } catch (error) {
          // An aborted prefill frees the GPU at once.
          this.#gpuFreeAt = 0;
          job.reject(error);
        } finally {
          this.#current = undefined;
        }
      }
    } finally {
      this.#draining = false;
    }
  }

  /**
   * Runs the prefill (a P/D decode: receives the prefill's KV instead) then emits each token at
   * the decode interval.
   */
  async #generate(
    reply: Reply,
    signal: AbortSignal,
    onToken: (index: number, text: string) => void,
  ): Promise<void> {
    if (reply.pd?.role === "decode") {
      await this.#pdReceive(reply, signal);
    } else {
      await this.#prefill(reply, signal);
      if (reply.pd) await this.#pdSend(reply, signal);
    }
    const seq = reply.record.seq;
    const slot = { rank: reply.rank, kvTokens: reply.promptTokens };
    this.#decoding.set(seq, slot);
    try {
      const stepMs = this.#opts.decodeSecondsPerToken * this.#opts.timeScale * 1000;
      const start = performance.now();
      for (let i = 0; i < reply.outputTokens; i++) {
        // The prefill produces the first token; each further one takes a decode step.
        if (i > 0) await sleepUntil(start + i * stepMs, signal);
        slot.kvTokens++;
        onToken(i, this.#opts.tokenText(i));
      }
    } finally {
      this.#decoding.delete(seq);
    }
  }

  #usage(reply: Reply): Record<string, unknown> {
    const usage: Record<string, unknown> = {
      prompt_tokens: reply.promptTokens,
      completion_tokens: reply.outputTokens,
      total_tokens: reply.promptTokens + reply.outputTokens,
    };
    if (this.#opts.reportCachedTokens) {
      usage.prompt_tokens_details = { cached_tokens: reply.record.cachedTokens ?? 0 };
    }
    return usage;
  }

  async #whole(request: Request, reply: Reply, echo: Record<string, string>): Promise<Response> {
    const { record } = reply;
    const signal = AbortSignal.any([request.signal, this.#life.signal]);
    const parts: string[] = [];
    try {
      await this.#generate(reply, signal, (_i, text) => parts.push(text));
    } catch (error) {
      if (error instanceof PdTransferError) {
        const message = this.#pdFailed(reply, error);
        return this.#error(500, message, "InternalServerError");
      }
      if (!(error instanceof Aborted)) {
        this.#finish(record, "http500");
        return this.#error(500, `fake engine hook failed: ${error}`, "InternalServerError");
      }
      this.#finish(record, this.#closed ? "engine_closed" : "client_abort");
      return new Response(null, { status: 499, headers: this.#headers() });
    }
    const text = parts.join("");
    if (reply.generate) {
      const usage = { ...reply, cachedTokens: record.cachedTokens ?? 0 };
      const answer = generateAnswer(reply.generate.rids, reply.generate.batch, parts, usage);
      record.headersAtMs = record.firstByteAtMs = this.#opts.now();
      this.#finish(record, "ok");
      return this.#json(200, answer, echo);
    }
    if (reply.responses) {
      const usage = { ...reply, cachedTokens: record.cachedTokens ?? 0 };
      const answer = responseObject(reply.id, this.model, text, "completed", usage);
      if (reply.body.store !== false) this.#responses.put(answer);
      record.headersAtMs = record.firstByteAtMs = this.#opts.now();
      this.#finish(record, "ok");
      return new Response(JSON.stringify(answer), {
        status: 200,
        headers: this.#headers({ "content-type": "application/json", ...echo }),
      });
    }
    if (reply.anthropic) {
      const usage = { ...reply, cachedTokens: record.cachedTokens ?? 0 };
      const json = JSON.stringify(
        anthropicMessage(reply.id, this.model, text, reply.finishReason, usage),
      );
      record.headersAtMs = record.firstByteAtMs = this.#opts.now();
      this.#finish(record, "ok");
      return new Response(json, {
        status: 200,
        headers: this.#headers({ "content-type": "application/json", ...echo }),
      });
    }
    const choice = reply.chat
      ? {
        index: 0,
        message: { role: "assistant", content: text, refusal: null },
        logprobs: null,
        finish_reason: reply.finishReason,
      }
      : { index: 0, text, logprobs: null, finish_reason: reply.finishReason };
    const answer: Record<string, unknown> = {
      id: reply.id,
      object: reply.chat ? "chat.completion" : "text_completion",
      created: reply.created,
      model: this.model,
      choices: [choice],
      usage: this.#usage(reply),
    };
    // vLLM's answers carry the field (null unless a NIXL prefill filled it).
    if (this.#pd && this.#pd.protocol !== "sglang") {
      answer.kv_transfer_params = reply.kvTransferParams;
    }
    const json = JSON.stringify(answer);
    record.headersAtMs = record.firstByteAtMs = this.#opts.now();
    const headers = this.#headers({ "content-type": "application/json", ...echo });
    if (reply.midstream) return this.#truncated(record, json.slice(0, json.length >> 1), headers);
    if (reply.stall) return this.#stalled(record, headers);
    this.#finish(record, "ok");
    return new Response(json, { status: 200, headers });
  }

  /**
   * Sends `text` then cuts the connection. The response declares a Content-Length it never
   * reaches, so the client's read fails like a crashed engine's, and Deno logs nothing.
   */
  #truncated(record: RequestRecord, text: string, headers: Headers): Response {
    headers.set("content-length", String(encoder.encode(text).length + 65536));
    this.#finish(record, "midstream");
    return new Response(
      new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(encoder.encode(text));
          controller.close();
        },
      }),
      { status: 200, headers },
    );
  }

  /** Headers, then silence until the client (or the engine) goes away. */
  #stalled(record: RequestRecord, headers: Headers): Response {
    const life = this.#life.signal;
    const finish = () => this.#finish(record, "stall");
    let onClose = () => {};
    return new Response(
      new ReadableStream<Uint8Array>({
        start(controller) {
          onClose = () => {
            finish();
            controller.close();
          };
          life.addEventListener("abort", onClose, { once: true });
        },
        cancel() {
          life.removeEventListener("abort", onClose);
          finish();
        },
      }),
      { status: 200, headers },
    );
  }

  #stream(reply: Reply, echo: Record<string, string>): Response {
    const { record } = reply;
    const cancelled = new AbortController();
    // After the response starts, the client going away shows up as the stream's cancel().
    const signal = AbortSignal.any([cancelled.signal, this.#life.signal]);
    const chunk = (choice: Record<string, unknown> | null, usage?: unknown): string => {
      const object: Record<string, unknown> = {
        id: reply.id,
        object: reply.chat ? "chat.completion.chunk" : "text_completion",
        created: reply.created,
        model: this.model,
        choices: choice ? [choice] : [],
      };
      if (reply.includeUsage) object.usage = usage ?? null;
      return `data: ${JSON.stringify(object)}\n\n`;
    };
    const tokenChoice = (text: string) =>
      reply.chat
        ? { index: 0, delta: { content: text }, logprobs: null, finish_reason: null }
        : { index: 0, text, logprobs: null, finish_reason: null };
    const headers = this.#headers({
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      ...echo,
    });
    if (reply.midstream) headers.set("content-length", "1048576");
    const run = async (controller: ReadableStreamDefaultController<Uint8Array>) => {
      const send = (text: string) => {
        if (record.firstByteAtMs === undefined) record.firstByteAtMs = this.#opts.now();
        controller.enqueue(encoder.encode(text));
      };
      const usage = () => ({ ...reply, cachedTokens: record.cachedTokens ?? 0 });
      try {
        if (reply.generate) {
          const { rids, batch } = reply.generate;
          const texts: string[] = [];
          await this.#generate(reply, signal, (_index, text) => {
            texts.push(text);
            send(generateEvents(rids, batch, texts, usage(), false));
          });
          send(generateEvents(rids, batch, texts, usage(), true));
          send("data: [DONE]\n\n");
          this.#finish(record, "ok");
          try {
            controller.close();
          } catch { /* already cancelled */ }
          return;
        }
        if (reply.responses) {
          const itemId = `msg_${reply.id.slice(5)}`;
          const texts: string[] = [];
          await this.#generate(reply, signal, (index, text) => {
            if (index === 0) {
              send(responseCreated(responseObject(reply.id, this.model, "", "in_progress", null)));
            }
            texts.push(text);
            send(responseDelta(itemId, text));
          });
          const done = responseObject(reply.id, this.model, texts.join(""), "completed", usage());
          if (reply.body.store !== false) this.#responses.put(done);
          send(responseCompleted(done));
          this.#finish(record, "ok");
          try {
            controller.close();
          } catch { /* already cancelled */ }
          return;
        }
        if (reply.anthropic) {
          await this.#generate(reply, signal, (index, text) => {
            if (index === 0) send(anthropicStreamStart(reply.id, this.model, usage()));
            send(anthropicStreamDelta(text));
          });
          send(anthropicStreamEnd(reply.finishReason, usage()));
          this.#finish(record, "ok");
          try {
            controller.close();
          } catch { /* already cancelled */ }
          return;
        }
        await this.#generate(reply, signal, (index, text) => {
          if (index === 0 && reply.chat) {
            send(chunk({
              index: 0,
              delta: { role: "assistant", content: "" },
              logprobs: null,
              finish_reason: null,
            }));
          }
          send(chunk(tokenChoice(text)));
          if (reply.midline) {
            const next = chunk(tokenChoice(text));
            send(next.slice(0, next.length >> 1));
          }
          // Cut after the first token: the declared length is never reached.
          if (reply.midstream) throw new Midstream();
          if (reply.stall) throw new Stall();
        });
        send(chunk(
          reply.chat
            ? { index: 0, delta: {}, logprobs: null, finish_reason: reply.finishReason }
            : { index: 0, text: "", logprobs: null, finish_reason: reply.finishReason },
        ));
        if (reply.includeUsage) send(chunk(null, this.#usage(reply)));
        send("data: [DONE]\n\n");
        this.#finish(record, "ok");
      } catch (error) {
        if (error instanceof Midstream) this.#finish(record, "midstream");
        else if (error instanceof Stall) {
          await stalledUntil(signal);
          this.#finish(record, "stall");
        } else if (error instanceof PdTransferError) {
          // After the headers all an engine can do is an error event (then [DONE], as vLLM).
          const message = this.#pdFailed(reply, error);
          try {
            send(`data: ${
              JSON.stringify({
                error: { message, type: "InternalServerError", param: null, code: 500 },
              })
            }\n\n`);
            send("data: [DONE]\n\n");
          } catch { /* client gone */ }
        } else if (error instanceof Aborted) {
          this.#finish(record, this.#closed ? "engine_closed" : "client_abort");
        } else {
          // A hook failed after the headers went out: all a real engine can do is an error event.
          this.#finish(record, "http500");
          try {
            send(`data: ${JSON.stringify({ error: { message: String(error), code: 500 } })}\n\n`);
          } catch { /* client gone */ }
        }
      }
      try {
        controller.close();
      } catch { /* already cancelled */ }
    };
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        void run(controller);
      },
      cancel() {
        cancelled.abort();
      },
    });
    record.headersAtMs = this.#opts.now();
    return new Response(body, { status: 200, headers });
  }

  // ---- load endpoints -----------------------------------------------------------------------

  /** Per data-parallel rank: waiting (`deferred` of them: decodes waiting for their KV), etc. */
  #perRank(): {
    waiting: number;
    deferred: number;
    running: number;
    pending: number;
    kv: number;
  }[] {
    const ranks = Array.from(
      { length: this.#opts.dataParallelSize },
      () => ({ waiting: 0, deferred: 0, running: 0, pending: 0, kv: 0 }),
    );
    for (const job of this.#queue) {
      ranks[job.rank].waiting++;
      ranks[job.rank].pending += job.promptTokens;
    }
    for (const d of this.#decoding.values()) {
      ranks[d.rank].running++;
      ranks[d.rank].kv += d.kvTokens;
    }
    for (const w of this.#pdWaiting.values()) {
      ranks[w.rank].waiting++;
      ranks[w.rank].deferred++;
    }
    for (const h of this.#pdHolding.values()) {
      ranks[h.rank].running++;
      ranks[h.rank].kv += h.kvTokens;
    }
    const current = this.#current;
    if (current) {
      const rank = ranks[current.job.rank];
      const total = current.endMs - current.startMs;
      const left = total > 0
        ? Math.max(0, Math.min(1, (current.endMs - performance.now()) / total))
        : 0;
      rank.running++;
      rank.pending += Math.round(current.uncached * left);
      rank.kv += current.job.promptTokens - Math.round(current.uncached * left);
    }
    return ranks;
  }

  #vllmMetrics(): string {
    const ranks = this.#perRank();
    const capacity = this.#opts.kvCapacityTokens / ranks.length;
    const labels = (rank: number) => `{model_name="${escapeLabel(this.model)}",engine="${rank}"}`;
    const lines: string[] = [];
    const family = (
      name: string,
      type: string,
      help: string,
      value: (rank: number) => number,
    ) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      ranks.forEach((_r, i) => lines.push(`${name}${labels(i)} ${promFloat(value(i))}`));
    };
    family(
      "vllm:num_requests_running",
      "gauge",
      "Number of requests in model execution batches.",
      (i) => ranks[i].running,
    );
    family(
      "vllm:num_requests_waiting",
      "gauge",
      "Number of requests waiting to be processed.",
      (i) => ranks[i].waiting,
    );
    if (!this.#opts.oldNames) {
      // vLLM 0.32: a decode waiting for its KV (WAITING_FOR_REMOTE_KVS) is deferred.
      const name = "vllm:num_requests_waiting_by_reason";
      lines.push(`# HELP ${name} Number of waiting requests by reason.`, `# TYPE ${name} gauge`);
      const model = escapeLabel(this.model);
      const line = (i: number, reason: string, n: number) =>
        `${name}{engine="${i}",model_name="${model}",reason="${reason}"} ${promFloat(n)}`;
      ranks.forEach((r, i) =>
        lines.push(line(i, "capacity", r.waiting - r.deferred), line(i, "deferred", r.deferred))
      );
    }
    family(
      this.#opts.oldNames ? "vllm:gpu_cache_usage_perc" : "vllm:kv_cache_usage_perc",
      "gauge",
      "KV-cache usage. 1 means 100 percent usage.",
      (i) => Math.min(1, ranks[i].kv / capacity),
    );
    if (!this.#opts.oldNames) {
      // The cache's size in the labels of an info gauge, as vLLM 0.32 writes it (no model_name).
      const name = "vllm:cache_config_info";
      lines.push(`# HELP ${name} Information of the LLMEngine CacheConfig`, `# TYPE ${name} gauge`);
      const blocks = Math.floor(capacity / 16);
      ranks.forEach((_r, i) =>
        lines.push(
          `${name}{block_size="16",engine="${i}",kv_cache_size_tokens="${blocks * 16}",` +
            `num_gpu_blocks="${blocks}"} 1.0`,
        )
      );
    }
    // Counters are not split by rank in the fake: rank 0 carries them all.
    family(
      "vllm:prefix_cache_queries_total",
      "counter",
      "Prefix cache queries, in terms of number of queried tokens.",
      (i) => (i === 0 ? this.stats.prefixCacheQueries : 0),
    );
    family(
      "vllm:prefix_cache_hits_total",
      "counter",
      "Prefix cache hits, in terms of number of cached tokens.",
      (i) => (i === 0 ? this.stats.prefixCacheHits : 0),
    );
    // A histogram family, so readers are exercised on the shapes real /metrics carry.
    const name = "vllm:time_to_first_token_seconds";
    lines.push(
      `# HELP ${name} Histogram of time to first token in seconds.`,
      `# TYPE ${name} histogram`,
    );
    const done = this.stats.served;
    for (const le of ["0.01", "0.1", "1.0", "+Inf"]) {
      lines.push(
        `${name}_bucket{le="${le}",model_name="${escapeLabel(this.model)}",engine="0"} ${
          promFloat(done)
        }`,
      );
    }
    lines.push(
      `${name}_count{model_name="${escapeLabel(this.model)}",engine="0"} ${promFloat(done)}`,
    );
    lines.push(`${name}_sum{model_name="${escapeLabel(this.model)}",engine="0"} 0.0`);
    return lines.join("\n") + "\n";
  }

  #sglangMetrics(): string {
    const ranks = this.#perRank();
    const capacity = this.#opts.kvCapacityTokens / ranks.length;
    const lines: string[] = [];
    const labels = (rank: number) =>
      `{model_name="${
        escapeLabel(this.model)
      }",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="${rank}"}`;
    const family = (name: string, help: string, value: (rank: number) => number) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
      ranks.forEach((_r, i) => lines.push(`${name}${labels(i)} ${promFloat(value(i))}`));
    };
    const queries = this.stats.prefixCacheQueries;
    family("sglang:num_running_reqs", "The number of running requests.", (i) => ranks[i].running);
    family(
      "sglang:num_queue_reqs",
      "The number of requests in the waiting queue.",
      (i) => ranks[i].waiting,
    );
    family("sglang:token_usage", "The token usage.", (i) => Math.min(1, ranks[i].kv / capacity));
    family(
      "sglang:cache_hit_rate",
      "The prefix cache hit rate.",
      () => (queries > 0 ? this.stats.prefixCacheHits / queries : 0),
    );
    return lines.join("\n") + "\n";
  }

  #sglangLoad(): unknown[] {
    return this.#perRank().map((rank, i) => {
      const entry: Record<string, number> = {
        dp_rank: i,
        num_reqs: rank.running + rank.waiting,
        num_waiting_reqs: rank.waiting,
        num_tokens: rank.kv + rank.pending,
      };
      if (!this.#opts.omitPendingTokens) entry.num_pending_tokens = rank.pending;
      // SGLang sends time.perf_counter(): a monotonic clock, not comparable across hosts.
      entry.ts_tic = performance.now() / 1000;
      return entry;
    });
  }
}

interface PdState {
  protocol: PdProtocol;
  role: PdRole;
  registry: PdRegistry;
  strict: boolean;
  timeoutMs: number;
  heartbeatMs: number;
  transferSecondsPerToken: number;
  engineIds: string[];
  sideChannelPort: number;
  blockSize: number;
  nextBlock: number;
  bootstrap?: {
    port: number;
    addr: string;
    /** `addr` as the registry knows it (normalized). */
    key: string;
    server: Deno.HttpServer<Deno.NetAddr> | undefined;
    unregister: () => void;
  };
  /** vLLM NIXL prefill: the option of that name. */
  prefillStops: boolean | ((body: OpenAiBody) => boolean);
}

/**
 * A Mooncake decode must pull from the engine of the DP rank its prefill ran on. Upstream the
 * named rank's sender never hears of the transfer and the decode fails after
 * VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT (480 s, "Timeout waiting for P side ready."); the fake fails
 * it as soon as both halves are known.
 */
function sameEngine(
  prefill: PdPrefillSide,
  engineId: string,
  engineIds: readonly string[],
): string | undefined {
  if (prefill.engineId === undefined || prefill.engineId === engineId) return undefined;
  return `the prefill ${prefill.instanceId} request ${prefill.seq} ran on DP rank ` +
    `${prefill.dpRank} (engine ${prefill.engineId}); the decode pulls from engine ${engineId} ` +
    `(rank ${engineIds.indexOf(engineId)}), whose sender never hears of this transfer`;
}

/** vLLM's engine id per DP rank: the configured id, suffixed `_dp<rank>` past rank 0. */
function rankEngineIds(base: string, ranks: number): string[] {
  return Array.from({ length: ranks }, (_v, i) => (i === 0 ? base : `${base}_dp${i}`));
}

/** A host as it goes in a URL: an IPv6 literal in brackets. */
function bracketed(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

/** Refuses impossible P/D options before anything listens. */
function checkPdOptions(options: FakeEngineOptions): void {
  const pd = options.pd!;
  if (!["vllm-nixl", "vllm-mooncake", "sglang"].includes(pd.protocol)) {
    throw new Error(`fake engine: unknown pd.protocol ${JSON.stringify(pd.protocol)}`);
  }
  if (pd.role !== "prefill" && pd.role !== "decode") {
    throw new Error(`fake engine: pd.role must be "prefill" or "decode"`);
  }
  const flavour = pd.protocol === "sglang" ? "sglang" : "vllm";
  if (options.flavour && options.flavour !== flavour) {
    throw new Error(`fake engine: pd.protocol ${pd.protocol} needs flavour ${flavour}`);
  }
  if (pd.prefillStops && (pd.protocol !== "vllm-nixl" || pd.role !== "prefill")) {
    throw new Error("fake engine: pd.prefillStops is for a vllm-nixl prefill");
  }
}

/** The stall mode's cue: silence after the first token. */
class Stall extends Error {}

class Midstream extends Error {
  constructor() {
    super("midstream cut");
  }
}

interface Reply {
  record: RequestRecord;
  body: OpenAiBody;
  chat: boolean;
  /** Anthropic's Messages API: answered in its shapes (fake_anthropic.ts). */
  anthropic: boolean;
  /** OpenAI's Responses API: answered in its shapes and stored (fake_responses.ts). */
  responses: boolean;
  /** SGLang's /generate: answered in its shapes (fake_sglang_generate.ts), per item of a batch. */
  generate?: { rids: string[]; batch: boolean };
  promptTokens: number;
  outputTokens: number;
  finishReason: "length" | "stop";
  rank: number;
  id: string;
  created: number;
  includeUsage: boolean;
  midstream: boolean;
  /** Cut in the middle of an event's line (streams only). */
  midline: boolean;
  stall: boolean;
  /** P/D engines: what the request asks (undefined: an ordinary or degraded request). */
  pd?: PdPlan;
  /** vLLM P/D engines: `kv_transfer_params` of the answer. */
  kvTransferParams: Record<string, unknown> | null;
}

function escapeLabel(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
}

/** Python prometheus_client prints floats: integers as `3.0`. */
function promFloat(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return Number.isInteger(value) ? value.toFixed(1) : String(value);
}

/** Starts a fake engine on 127.0.0.1 (port 0 unless given). Call `close()` when done. */
export function startFakeEngine(options: FakeEngineOptions = {}): FakeEngine {
  return Engine.create(options);
}

/** Resolves when `signal` aborts: a stalled stream stays silent until then. */
function stalledUntil(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener("abort", () => resolve(), { once: true })
  );
}

/**
 * What a decode reports as `cached_tokens`: SGLang copies its prefill's hits; vLLM 0.32 reports
 * the prefill's hits when the params carry them (NIXL, output_processor.py), else everything it
 * did not compute, the transferred prompt (Mooncake).
 */
function decodeCachedTokens(
  protocol: PdProtocol,
  record: RequestRecord,
  prefill: PdPrefillSide,
  promptTokens: number,
): number {
  if (protocol === "sglang") return prefill.cachedTokens ?? 0;
  const remoteHits = (record.pd?.kvTransferParams as { remote_prefill_cached_tokens?: unknown })
    ?.remote_prefill_cached_tokens;
  return Number.isInteger(remoteHits) ? remoteHits as number : promptTokens;
}

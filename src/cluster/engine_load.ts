/**
 * Pure readers that turn an engine's own load page into one `EngineLoadReport` (docs/compat.md §6):
 * vLLM `/metrics` (Prometheus text, new and old gauge names, summed over `engine` labels), SGLang
 * `/get_load` (JSON, summed over data-parallel ranks) and SGLang `/metrics`.
 */
import { parsePrometheusText, type PromSample } from "./prometheus_text.ts";

export interface EngineLoadReport {
  /** Requests queued in the engine and not yet scheduled. */
  waitingRequests: number;
  /** Requests scheduled: decoding, and for vLLM also those part-way through their prefill. */
  runningRequests: number;
  /**
   * Of the waiting requests, those the engine defers for a transient reason rather than for want
   * of capacity: above all a KV transfer in progress (vLLM's
   * `num_requests_waiting_by_reason{reason="deferred"}`, from 0.32). Absent when not reported.
   */
  deferredWaitingRequests?: number;
  /**
   * Tokens waiting for prefill (SGLang `num_pending_tokens`: the full length of each queued
   * prompt, cached or not, plus the rest of the prefill in progress). Absent when not reported.
   */
  pendingPrefillTokens?: number;
  /** KV-cache usage in [0, 1], the mean over data-parallel ranks. */
  kvUsage?: number;
  /** KV tokens the engine's cache holds, summed over ranks (vLLM's `cache_config_info`). */
  kvCapacityTokens?: number;
  /** KV tokens in use: each rank's usage times its cache's size, summed (when both are known). */
  kvUsedTokens?: number;
  /** When the engine was asked, on the router's clock (ms). */
  observedAtMs: number;
}

/** Where an instance's load is read from. */
export type EngineLoadSource = "vllm_metrics" | "sglang_get_load" | "sglang_metrics";

/** The page could not be read as the expected engine's load: the message says what to check. */
export class EngineLoadFormatError extends Error {
  override name = "EngineLoadFormatError";
}

export interface ReadLoadOptions {
  observedAtMs: number;
  /** Keep only series of this model (`model_name` label; SGLang's old `name` label too). */
  modelName?: string;
}

const VLLM = {
  waiting: "vllm:num_requests_waiting",
  waitingByReason: "vllm:num_requests_waiting_by_reason",
  running: "vllm:num_requests_running",
  kvUsage: "vllm:kv_cache_usage_perc",
  kvUsageOld: "vllm:gpu_cache_usage_perc",
  cacheConfig: "vllm:cache_config_info",
} as const;

const SGLANG = {
  waiting: "sglang:num_queue_reqs",
  running: "sglang:num_running_reqs",
  kvUsage: "sglang:token_usage",
} as const;

interface Aggregate {
  sum: number;
  count: number;
}

function aggregate(samples: PromSample[], name: string): Aggregate | undefined {
  let sum = 0;
  let count = 0;
  let seen = false;
  for (const s of samples) {
    if (s.name !== name) continue;
    seen = true;
    if (Number.isNaN(s.value)) continue; // an engine that has not measured yet
    sum += s.value;
    count++;
  }
  return seen ? { sum, count } : undefined;
}

function mean(a: Aggregate | undefined): number | undefined {
  return a && a.count > 0 ? a.sum / a.count : undefined;
}

function modelOf(sample: PromSample): string | undefined {
  return sample.labels.model_name ?? sample.labels.name;
}

/** Keeps the samples of `modelName` (unlabelled series too); explains a name that matches none. */
function forModel(samples: PromSample[], modelName: string | undefined, key: string): PromSample[] {
  if (modelName === undefined) return samples;
  const kept = samples.filter((s) => {
    const model = modelOf(s);
    return model === undefined || model === modelName;
  });
  if (kept.some((s) => s.name === key) || !samples.some((s) => s.name === key)) return kept;
  const served = [...new Set(samples.map(modelOf).filter((m) => m !== undefined))];
  throw new EngineLoadFormatError(
    `no ${key} series for model "${modelName}"; the engine serves ${
      served.map((m) => `"${m}"`).join(", ")
    }: set the instance's model name to the engine's served model name`,
  );
}

function parseMetrics(text: string, names: Set<string>) {
  // Indented lines (which the format allows and no engine writes) are left to the full parse.
  const indented = /^[ \t]/.test(text) || text.includes("\n ") || text.includes("\n\t");
  const parsed = parsePrometheusText(indented ? text : linesNamed(text, names), {
    keep: (name) => names.has(name),
  });
  return parsed.samples;
}

/**
 * The lines of a metrics page that begin with one of `names` (or its quoted form), in no
 * particular order: vLLM's page is ~50 KB of other series, and cutting all of it into lines was
 * most of the cost of reading it (docs/benchmarks.md, "Load pages"). A name is matched as a
 * prefix, each line once; the parser then keeps the exact names.
 */
export function linesNamed(text: string, names: Iterable<string>): string {
  const kept: string[] = [];
  const quoted = text.includes('{"'); // a search that finds nothing reads the whole page
  // A line one name begins may begin another too (`..._waiting_by_reason`, `..._waiting`): once.
  const seen = new Set<number>();
  for (const name of names) {
    for (const start of quoted ? [name, `{"${name}"`] : [name]) {
      let at = text.startsWith(start) ? 0 : lineStart(text, start, 0);
      while (at >= 0) {
        const end = text.indexOf("\n", at);
        if (!seen.has(at)) kept.push(text.slice(at, end < 0 ? text.length : end));
        seen.add(at);
        at = end < 0 ? -1 : lineStart(text, start, end);
      }
    }
  }
  return kept.join("\n");
}

/** Where the next line beginning with `start` begins, searching from `from`; -1 if none. */
function lineStart(text: string, start: string, from: number): number {
  const at = text.indexOf(`\n${start}`, from);
  return at < 0 ? -1 : at + 1;
}

/** Reads vLLM's `/metrics`: waiting and running summed over engines, KV usage averaged. */
export function readVllmMetrics(text: string, options: ReadLoadOptions): EngineLoadReport {
  const samples = forModel(
    parseMetrics(text, new Set(Object.values(VLLM))),
    options.modelName,
    VLLM.waiting,
  );
  const waiting = aggregate(samples, VLLM.waiting);
  const running = aggregate(samples, VLLM.running);
  if (!waiting || !running) {
    throw new EngineLoadFormatError(
      `vLLM /metrics has no ${
        waiting ? VLLM.running : VLLM.waiting
      } gauge: is this a vLLM server, and is its /metrics endpoint the one configured?`,
    );
  }
  const report: EngineLoadReport = {
    waitingRequests: waiting.sum,
    runningRequests: running.sum,
    observedAtMs: options.observedAtMs,
  };
  const deferred = aggregate(
    samples.filter((s) => s.labels.reason === "deferred"),
    VLLM.waitingByReason,
  );
  if (deferred) report.deferredWaitingRequests = deferred.sum;
  const kv = mean(aggregate(samples, VLLM.kvUsage) ?? aggregate(samples, VLLM.kvUsageOld));
  if (kv !== undefined) report.kvUsage = kv;
  const capacity = vllmKvCapacityTokens(samples);
  if (capacity === undefined) return report;
  report.kvCapacityTokens = [...capacity.values()].reduce((sum, tokens) => sum + tokens, 0);
  const used = vllmKvUsedTokens(samples, capacity);
  if (used !== undefined) report.kvUsedTokens = used;
  return report;
}

/**
 * Each engine's KV tokens (by its `engine` label) from the labels of vLLM's `cache_config_info`
 * gauge: `kv_cache_size_tokens`, or `num_gpu_blocks` × `block_size` on builds without it.
 * Undefined when any engine's is unknown (the labels read "None" before the cache is sized).
 */
function vllmKvCapacityTokens(samples: PromSample[]): Map<string, number> | undefined {
  const byEngine = new Map<string, number>();
  for (const s of samples) {
    if (s.name !== VLLM.cacheConfig) continue;
    const { kv_cache_size_tokens: size, num_gpu_blocks: blocks, block_size: blockSize } = s.labels;
    const tokens = Number(size) || Number(blocks) * Number(blockSize);
    if (!(tokens > 0)) return undefined;
    byEngine.set(s.labels.engine ?? "", tokens);
  }
  return byEngine.size > 0 ? byEngine : undefined;
}

/** Σ over engines of usage × cache size; undefined unless every usage has its engine's size. */
function vllmKvUsedTokens(
  samples: PromSample[],
  capacity: Map<string, number>,
): number | undefined {
  const usage = samples.filter((s) => s.name === VLLM.kvUsage || s.name === VLLM.kvUsageOld);
  let used = 0;
  for (const s of usage) {
    const tokens = capacity.get(s.labels.engine ?? "");
    if (tokens === undefined || Number.isNaN(s.value)) return undefined;
    used += s.value * tokens;
  }
  return usage.length > 0 ? used : undefined;
}

/** Reads SGLang's `/metrics`: queue and running requests summed, token usage averaged. */
export function readSglangMetrics(text: string, options: ReadLoadOptions): EngineLoadReport {
  const samples = forModel(
    parseMetrics(text, new Set(Object.values(SGLANG))),
    options.modelName,
    SGLANG.waiting,
  );
  const waiting = aggregate(samples, SGLANG.waiting);
  const running = aggregate(samples, SGLANG.running);
  if (!waiting || !running) {
    throw new EngineLoadFormatError(
      `SGLang /metrics has no ${
        waiting ? SGLANG.running : SGLANG.waiting
      } gauge: start SGLang with --enable-metrics, or read /get_load instead`,
    );
  }
  const report: EngineLoadReport = {
    waitingRequests: waiting.sum,
    runningRequests: running.sum,
    observedAtMs: options.observedAtMs,
  };
  const kv = mean(aggregate(samples, SGLANG.kvUsage));
  if (kv !== undefined) report.kvUsage = kv;
  return report;
}

function count(entry: Record<string, unknown>, field: string, rank: number): number {
  const value = entry[field];
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new EngineLoadFormatError(
      `SGLang /get_load rank ${rank}: "${field}" is ${
        JSON.stringify(value) ?? "missing"
      }, expected a non-negative number`,
    );
  }
  return value;
}

/**
 * Reads SGLang's `/get_load` (one entry per data-parallel rank; a single object is accepted too):
 * waiting = Σ num_waiting_reqs, running = Σ (num_reqs − num_waiting_reqs), pending prefill tokens
 * = Σ num_pending_tokens when every rank reports it (old builds do not). `ts_tic` is
 * `time.perf_counter()` on the engine's host, not a wall clock, so it is not used.
 */
export function readSglangLoad(json: unknown, options: ReadLoadOptions): EngineLoadReport {
  const entries = Array.isArray(json) ? json : [json];
  if (entries.length === 0) {
    throw new EngineLoadFormatError("SGLang /get_load returned an empty list: is the engine up?");
  }
  let waiting = 0;
  let running = 0;
  let pending = 0;
  let allPending = true;
  entries.forEach((raw, i) => {
    if (!raw || typeof raw !== "object" || Array.isArray(raw)) {
      throw new EngineLoadFormatError(
        `SGLang /get_load entry ${i} is ${JSON.stringify(raw)}, expected an object: ` +
          `is this an SGLang server?`,
      );
    }
    const entry = raw as Record<string, unknown>;
    const rank = typeof entry.dp_rank === "number" ? entry.dp_rank : i;
    const reqs = count(entry, "num_reqs", rank);
    const waitingReqs = count(entry, "num_waiting_reqs", rank);
    waiting += waitingReqs;
    running += Math.max(0, reqs - waitingReqs);
    if (entry.num_pending_tokens === undefined || entry.num_pending_tokens === null) {
      allPending = false;
    } else pending += count(entry, "num_pending_tokens", rank);
  });
  const report: EngineLoadReport = {
    waitingRequests: waiting,
    runningRequests: running,
    observedAtMs: options.observedAtMs,
  };
  if (allPending) report.pendingPrefillTokens = pending;
  return report;
}

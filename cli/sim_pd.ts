/** The simulator CLI's prefill/decode mode: flags, the runs, and the files it writes. */
import { type DecodeModel, maxBatchWithin } from "../src/scheduling/decode_model.ts";
import { DECODE_POLICY_NAMES, type DecodePolicyName } from "../src/scheduling/decode_policy.ts";
import { DECODE_LOAD_SCOPES, type DecodeLoadScope } from "../src/scheduling/pd_admission.ts";
import { isPolicyName, POLICY_NAMES } from "../src/scheduling/registry.ts";
import { LOCAL_PREFILL_MODES } from "../src/scheduling/local_prefill.ts";
import { LocalPrefillSchema } from "../src/config/schema.ts";
import type { LocalPrefillSetting } from "../src/sim/decode_prefill.ts";
import { instanceLoadSvg, poolLoadSvg, ttftCdfSvg } from "../src/sim/charts.ts";
import {
  DECODE_KV_VIEWS,
  type DecodeKvView,
  PD_ADMISSIONS,
  type PdAdmission,
  type PdConfig,
  type PdResult,
  type PdRun,
  type PdTopology,
  simulatePd,
} from "../src/sim/pd_simulator.ts";
import { pdResultsMarkdown } from "../src/sim/pd_report.ts";
import { type PdSummary, summarizePd, topologyLabel } from "../src/sim/pd_summary.ts";
import { describeModel, rounded } from "../src/sim/results_markdown.ts";
import type { SimConfig } from "../src/sim/simulator.ts";
import { DEFAULT_SIM_QUEUE, type SimQueueConfig } from "../src/sim/sim_queue.ts";
import type { TraceRequest } from "../src/sim/trace.ts";

/** The router's defaults (src/config/model_schema.ts), which the simulator's follow. */
const ROUTER_LOCAL_PREFILL = LocalPrefillSchema.parse({});

export const PD_USAGE = `
Prefill/decode disaggregation (docs/sim/pd/README.md): with --prefill and --decode, and/or
--neutral, every policy of --policies runs on each cluster with each --early-rejection mode:
  --prefill N                prefill instances of the disaggregated cluster (with --decode)
  --decode N                 decode instances of the disaggregated cluster (with --prefill)
  --neutral N                N neutral instances (prefill and decode on each), as well
  --neutral-chunk LIST       neutral variants: off (a prompt is prefilled whole while decoding
                             waits) and chunked-prefill budgets in tokens (default off,8192)
  --early-rejection LIST     off | baseline | early | predicted | committed, comma-separated
                             (default off); committed judges every request bound for the
                             decode instance, prefilling ones too; neutral clusters run off and
                             baseline (TTFT only) of the list
  --tbt-slo S                the same as --slo-tbt
  --decode-model b,r[,k]     decode step s = b + r·batch + k·KV tokens of the batch
                             (default 0.03,0.0005,4e-8)
  --decode-max-batch N       requests a decode instance batches, later ones wait (default: the
                             largest batch the model keeps within the TBT SLO at the trace's
                             mean context)
  --decode-kv-tokens N       KV capacity of a decode instance in tokens (default 1500000)
  --pd-transfer-gbps X       prefill → decode KV bandwidth in GB/s (default: --transfer-gbps)
  --decode-policy NAME       ${DECODE_POLICY_NAMES.join(" | ")} (default least_running)
  --mean-decode-s S          the router's first guess of a decode's duration (default 10)
  --decode-load LIST         instance | pool, comma-separated: whose decode load early,
                             predicted and committed judge, the chosen instance's or the decode
                             pool's mean (the paper's) (default instance)
  --local-prefill LIST       conditional disaggregation on P/D clusters: off | threshold |
                             predicted, comma-separated, each mode its own run (the router's
                             decideLocalPrefill; default: not modelled, the runs as before)
  --local-prefill-tokens N   uncached tokens up to which a decode instance prefills itself
                             (the router's localPrefill.maxTokens, default 1000)
  --local-prefill-chunk N    decode instances prefill in chunks of N tokens, one with each
                             decode step (the router's localPrefill.chunkTokens; default:
                             whole, the batch waiting)
  --decode-kv LIST           guess | prompt | reported, comma-separated: the router's decode
                             judgments take the decode model's KV tokens per request; or the
                             request's own prompt and the engines' batch cap; or that with each
                             decode engine's own KV per request for its batch (default guess)
  --pd-queue LIST            off | on, comma-separated, each its own run: a request admission
                             refuses at arrival waits in the router's flow-control queue (its
                             default TTL and bounds) instead (default: not modelled, refused;
                             not with --local-prefill)
`;

export interface PdCliOptions {
  topologies: PdTopology[];
  policies: string[];
  admissions: PdAdmission[];
  decodeModel: DecodeModel;
  decodeMaxBatch?: number;
  decodeKvCapacityTokens: number;
  pdTransferGbps?: number;
  decodePolicy: DecodePolicyName;
  meanDecodeS: number;
  decodeLoads: DecodeLoadScope[];
  /** Conditional disaggregation settings, one run each; empty: not modelled (as before). */
  localPrefills: LocalPrefillSetting[];
  /** What the router's decode judgments know of KV, one run each; empty: the guess, as before. */
  decodeKvViews: DecodeKvView[];
  /** With and/or without the flow-control queue, one run each; empty: without, as before. */
  queues: ("off" | "on")[];
}

/** Reads a numeric option (or its fallback), adding a problem when the value fails `check`. */
export type NumberReader = (
  key: string,
  fallback: number,
  check: (v: number) => boolean,
  what: string,
) => number;

const count = (v: number) => Number.isInteger(v) && v >= 1;
const positive = (v: number) => v > 0;

/** The P/D options, or undefined when neither --prefill/--decode nor --neutral is given. */
export function parsePdOptions(
  values: ReadonlyMap<string, string>,
  num: NumberReader,
  problems: string[],
): PdCliOptions | undefined {
  const has = (key: string) => values.has(key);
  if (!has("prefill") && !has("decode") && !has("neutral")) return undefined;
  // In this order, so that problems are listed as the flags are documented.
  const topologies = parseTopologies(values, num, problems);
  const policies = parsePolicies(values, problems);
  const admissions = parseNames(values, "early-rejection", PD_ADMISSIONS, "off", problems);
  const decodePolicy = (values.get("decode-policy") ?? "least_running") as DecodePolicyName;
  if (!DECODE_POLICY_NAMES.includes(decodePolicy)) {
    problems.push(`--decode-policy must be one of ${DECODE_POLICY_NAMES.join(", ")}`);
  }
  const decodeLoads = parseNames(values, "decode-load", DECODE_LOAD_SCOPES, "instance", problems);
  const localPrefills = parseLocalPrefills(values, num, problems);
  const decodeKvViews = values.has("decode-kv")
    ? parseNames(values, "decode-kv", DECODE_KV_VIEWS, "guess", problems)
    : [];
  const queues = values.has("pd-queue")
    ? parseNames(values, "pd-queue", ["off", "on"] as const, "off", problems)
    : [];
  if (queues.includes("on") && localPrefills.some((l) => l.mode !== "off")) {
    problems.push("--pd-queue on is not modelled with --local-prefill");
  }
  const maxBatchRaw = values.get("decode-max-batch");
  const transferRaw = values.get("pd-transfer-gbps");
  return {
    topologies,
    policies,
    admissions,
    decodeModel: parseDecodeModel(values.get("decode-model"), problems),
    decodeMaxBatch: maxBatchRaw === undefined
      ? undefined
      : num("decode-max-batch", 1, count, "a positive integer"),
    decodeKvCapacityTokens: num("decode-kv-tokens", 1_500_000, positive, "a positive number"),
    pdTransferGbps: transferRaw === undefined
      ? undefined
      : num("pd-transfer-gbps", 85, positive, "a positive number"),
    decodePolicy,
    meanDecodeS: num("mean-decode-s", 10, positive, "a positive number"),
    decodeLoads,
    localPrefills,
    decodeKvViews,
    queues,
  };
}

/**
 * `--local-prefill LIST` with `--local-prefill-tokens N` and `--local-prefill-chunk N`; none when
 * the flag is absent.
 */
function parseLocalPrefills(
  values: ReadonlyMap<string, string>,
  num: NumberReader,
  problems: string[],
): LocalPrefillSetting[] {
  const maxTokens = num(
    "local-prefill-tokens",
    ROUTER_LOCAL_PREFILL.maxTokens,
    (v) => v >= 0,
    "a non-negative number",
  );
  const chunkTokens = num(
    "local-prefill-chunk",
    0,
    (v) => Number.isInteger(v) && v >= 1,
    "a whole number of tokens, 1 or more",
  );
  const chunked = values.has("local-prefill-chunk") ? { chunkTokens } : {};
  if (!values.has("local-prefill")) {
    for (const flag of ["local-prefill-tokens", "local-prefill-chunk"]) {
      if (values.has(flag)) problems.push(`--${flag} needs --local-prefill`);
    }
    return [];
  }
  return parseNames(values, "local-prefill", LOCAL_PREFILL_MODES, "off", problems)
    .map((mode) => ({ mode, maxTokens, ...chunked }));
}

/** `--prefill N --decode M` and `--neutral N` with each `--neutral-chunk` variant. */
function parseTopologies(
  values: ReadonlyMap<string, string>,
  num: NumberReader,
  problems: string[],
): PdTopology[] {
  const has = (key: string) => values.has(key);
  const topologies: PdTopology[] = [];
  if (has("prefill") || has("decode")) {
    if (!has("prefill") || !has("decode")) {
      problems.push("--prefill and --decode go together");
    } else {
      topologies.push({
        kind: "pd",
        prefill: num("prefill", 8, count, "a positive integer"),
        decode: num("decode", 8, count, "a positive integer"),
      });
    }
  }
  if (has("neutral")) {
    const instances = num("neutral", 16, count, "a positive integer");
    for (const variant of (values.get("neutral-chunk") ?? "off,8192").split(",")) {
      const v = variant.trim();
      if (v === "off") topologies.push({ kind: "neutral", instances, chunked: false });
      else if (count(Number(v))) {
        topologies.push({ kind: "neutral", instances, chunked: true, chunkTokens: Number(v) });
      } else problems.push(`--neutral-chunk: "${v}" is neither off nor a positive integer`);
    }
  }
  return topologies;
}

function parsePolicies(values: ReadonlyMap<string, string>, problems: string[]): string[] {
  const policies: string[] = [];
  const names = values.get("policies") ?? "random,least_load,cache_aware,mooncake_ttft";
  for (const name of names.split(",")) {
    const policy = name.trim();
    if (isPolicyName(policy)) policies.push(policy);
    else {
      problems.push(
        `unknown policy "${policy}" in P/D mode (valid: ${POLICY_NAMES.join(", ")}; ` +
          `admission comes from --early-rejection)`,
      );
    }
  }
  return policies;
}

/** A comma-separated `--key` of `allowed` names (or `fallback`); each unknown one is a problem. */
function parseNames<T extends string>(
  values: ReadonlyMap<string, string>,
  key: string,
  allowed: readonly T[],
  fallback: T,
  problems: string[],
): T[] {
  const names: T[] = [];
  for (const raw of (values.get(key) ?? fallback).split(",")) {
    const name = raw.trim() as T;
    if (allowed.includes(name)) names.push(name);
    else problems.push(`--${key}: "${raw}" is not one of ${allowed.join(", ")}`);
  }
  return names;
}

function parseDecodeModel(raw: string | undefined, problems: string[]): DecodeModel {
  const fallback = { baseS: 0.03, perRequestS: 0.0005, perKvTokenS: 4e-8 };
  if (raw === undefined) return fallback;
  const parts = raw.split(",").map(Number);
  if (parts.length < 2 || parts.length > 3 || parts.some((v) => !(Number.isFinite(v) && v >= 0))) {
    problems.push(`--decode-model must be b,r[,k] with non-negative numbers (got "${raw}")`);
    return fallback;
  }
  return { baseS: parts[0], perRequestS: parts[1], perKvTokenS: parts[2] ?? 0 };
}

/** The P/D runs' config from the shared simulator config and the P/D options. */
export function pdConfigOf(
  trace: readonly TraceRequest[],
  config: Omit<SimConfig, "loadThresholdTokens">,
  pd: PdCliOptions,
): PdConfig {
  const meanContext = trace.reduce((sum, r) => sum + r.inputLength + r.outputLength / 2, 0) /
    Math.max(1, trace.length);
  const routerDecodeModel = { ...pd.decodeModel, kvTokensPerRequest: Math.round(meanContext) };
  return {
    cacheBlocks: config.cacheBlocks,
    chunkTokens: config.chunkTokens,
    blockTokens: config.blockTokens,
    speed: config.speed,
    seed: config.seed,
    sloTtftS: config.sloTtftS,
    sloTbtS: config.sloTbtS,
    kvPool: config.kvPool,
    ttft: config.ttft,
    engineModel: config.engineModel,
    heterogeneity: config.heterogeneity,
    refine: config.refine,
    loadFilterTokens: config.loadFilterTokens,
    timelinePoints: 1000,
    engineDecodeModel: pd.decodeModel,
    routerDecodeModel,
    decodePolicy: pd.decodePolicy,
    decodeMaxBatch: pd.decodeMaxBatch ?? maxBatchWithin(routerDecodeModel, config.sloTbtS),
    decodeKvCapacityTokens: pd.decodeKvCapacityTokens,
    pdTransferBytesPerS: (pd.pdTransferGbps ?? config.ttft.transferBytesPerS / 1e9) * 1e9,
    meanDecodeS: pd.meanDecodeS,
  };
}

/**
 * Every (topology, policy, mode) the options ask for, the modes judged at arrival once per decode
 * load scope (named in the label when there are several); neutral clusters skip the P/D modes.
 */
export function pdRuns(pd: PdCliOptions, queue: SimQueueConfig = DEFAULT_SIM_QUEUE): PdRun[] {
  const runs: PdRun[] = [];
  for (const run of admissionRuns(pd)) {
    if (run.topology.kind !== "pd" || pd.localPrefills.length === 0) {
      runs.push(run);
      continue;
    }
    for (const localPrefill of pd.localPrefills) {
      runs.push({ ...run, label: `${run.label} local-${localPrefill.mode}`, localPrefill });
    }
  }
  return runs.flatMap((run) => decodeKvRuns(run, pd.decodeKvViews))
    .flatMap((run) => queueRuns(run, pd.queues, queue));
}

/**
 * `run` without and/or with the flow-control queue `queue` (the --queue-* options, the router's
 * defaults unless given; named in the label); as it is without the flag.
 */
function queueRuns(
  run: PdRun,
  queues: readonly ("off" | "on")[],
  queue: SimQueueConfig,
): PdRun[] {
  if (queues.length === 0) return [run];
  return queues.map((q) => q === "off" ? run : { ...run, label: `${run.label} queue`, queue });
}

/** `run` once per `--decode-kv` view, named in the label; as it is without the flag. */
function decodeKvRuns(run: PdRun, views: readonly DecodeKvView[]): PdRun[] {
  if (run.topology.kind !== "pd" || views.length === 0) return [run];
  return views.map((decodeKv) => ({ ...run, label: `${run.label} kv-${decodeKv}`, decodeKv }));
}

/** The (topology, policy, mode) runs, before conditional disaggregation's variants. */
function admissionRuns(pd: PdCliOptions): PdRun[] {
  const runs: PdRun[] = [];
  for (const topology of pd.topologies) {
    const modes = topology.kind === "pd"
      ? pd.admissions
      : pd.admissions.filter((m) => m === "off" || m === "baseline");
    for (const policy of pd.policies) {
      for (const admission of modes.length ? modes : ["off" as const]) {
        const label = `${topologyLabel(topology)} ${policy}${
          admission === "off" ? "" : ` ${admission}`
        }`;
        if (admission === "off" || admission === "baseline") {
          runs.push({ label, policy, topology, admission });
          continue;
        }
        for (const decodeLoad of pd.decodeLoads) {
          const scoped = pd.decodeLoads.length > 1 ? `${label} (${decodeLoad})` : label;
          runs.push({ label: scoped, policy, topology, admission, decodeLoad });
        }
      }
    }
  }
  return runs;
}

/** Runs the P/D mode and writes results.json, results.md and the charts to `out`. */
export async function runPd(
  trace: readonly TraceRequest[],
  config: Omit<SimConfig, "loadThresholdTokens">,
  pd: PdCliOptions,
  context: { out: string; command: string; traceName: string },
): Promise<number> {
  const pdConfig = pdConfigOf(trace, config, pd);
  const summaries: Record<string, PdSummary> = {};
  const results = [];
  const queue = config.queue ?? DEFAULT_SIM_QUEUE;
  for (const run of pdRuns(pd, queue)) {
    const started = performance.now();
    const result = simulatePd(trace, pdConfig, run);
    const s = summarizePd(result, pdConfig.sloTtftS, pdConfig.sloTbtS);
    summaries[run.label] = s;
    results.push(result);
    console.log(runLine(run.label, s, (performance.now() - started) / 1000));
  }
  await writePdResults(context.out, summaries, results, pdConfig, {
    settings: pdSettings(trace, pd, pdConfig, context.traceName, queue),
    command: context.command,
  });
  console.log(
    `Wrote ${context.out}/results.json, results.md, ttft_cdf.svg, tbt_cdf.svg, ` +
      `instance_load.svg, pool_load.svg, pool_load_zoom.svg`,
  );
  return 0;
}

/** One run's progress line on the console: its headline figures and how long it took. */
function runLine(label: string, s: PdSummary, elapsedS: number): string {
  return `${label.padEnd(36)} mean ${s.meanTtftS.toFixed(2)} s  p90 ${s.p90TtftS.toFixed(2)} s  ` +
    `slo ${(s.sloAttainment * 100).toFixed(1)}%  rejected ${s.rejected} ` +
    `(${s.rejectedAfterPrefill} after prefill)  hit ${s.hitRatio.toFixed(3)}  ` +
    `TBT p99 ${s.tbtP99S.toFixed(3)} s  both ${s.withinBothSlos}` +
    (s.localPrefill ? `  local ${s.localPrefill.localPrefills}` : "") +
    `  (${elapsedS.toFixed(1)} s)`;
}

/** The settings the results record (results.json and results.md): the trace and the config. */
function pdSettings(
  trace: readonly TraceRequest[],
  pd: PdCliOptions,
  pdConfig: PdConfig,
  traceName: string,
  queue: SimQueueConfig,
): Record<string, string | number | boolean> {
  const meanPrompt = trace.reduce((sum, r) => sum + r.inputLength, 0) / trace.length;
  const decodeModel = pdConfig.engineDecodeModel;
  return {
    trace: `${traceName} (${trace.length} requests, mean prompt ${Math.round(meanPrompt)} tokens)`,
    clusters: pd.topologies.map(topologyLabel).join(", "),
    speed: pdConfig.speed,
    seed: pdConfig.seed,
    "TTFT SLO (s)": pdConfig.sloTtftS,
    "TBT SLO (s)": pdConfig.sloTbtS,
    "KV pool": pdConfig.kvPool,
    "cache per prefill instance (blocks)": pdConfig.cacheBlocks,
    "chunk tokens (prefill instances)": pdConfig.chunkTokens,
    "prefill model (s, n in k tokens)": describeModel(pdConfig.engineModel),
    "decode step (s)": `${decodeModel.baseS} + ${decodeModel.perRequestS}·batch + ${
      decodeModel.perKvTokenS ?? 0
    }·KV tokens`,
    "router's KV tokens per decoding request": pdConfig.routerDecodeModel.kvTokensPerRequest ?? 0,
    "decode max batch": pdConfig.decodeMaxBatch ?? "none",
    "decode KV capacity (tokens)": pdConfig.decodeKvCapacityTokens,
    "decode policy": pdConfig.decodePolicy,
    "decode load judged at arrival (early, predicted, committed)": pd.decodeLoads.join(", "),
    "prefill → decode transfer (GB/s)": pdConfig.pdTransferBytesPerS / 1e9,
    "pool transfer (GB/s)": pdConfig.ttft.transferBytesPerS / 1e9,
    "router's first mean decode guess (s)": pdConfig.meanDecodeS,
    "online refinement": pdConfig.refine,
    ...(pd.queues.includes("on")
      ? {
        "flow-control queue (TTL s, max requests, admit when)":
          `${queue.ttlS}, ${queue.maxRequests}, ${queue.admitWhen}`,
      }
      : {}),
    ...(pd.localPrefills.length > 0
      ? {
        "local prefill (modes, max uncached tokens)": `${
          pd.localPrefills.map((l) => l.mode).join(", ")
        }; ${pd.localPrefills[0].maxTokens}`,
        "decode-side prefix cache (blocks)": Math.floor(
          pdConfig.decodeKvCapacityTokens / pdConfig.blockTokens,
        ),
      }
      : {}),
  };
}

/** results.json, results.md and the charts, into `out`. */
async function writePdResults(
  out: string,
  summaries: Record<string, PdSummary>,
  results: PdResult[],
  config: PdConfig,
  context: { settings: Record<string, string | number | boolean>; command: string },
): Promise<void> {
  await Deno.mkdir(out, { recursive: true });
  const json = {
    runs: summaries,
    settings: context.settings,
    command: context.command,
    exampleDecisions: Object.fromEntries(results.map((r) => [r.label, r.exampleDecision])),
  };
  await Deno.writeTextFile(`${out}/results.json`, JSON.stringify(json, rounded, 2) + "\n");
  await Deno.writeTextFile(
    `${out}/results.md`,
    pdResultsMarkdown(summaries, { command: context.command, settings: context.settings }),
  );
  await writeLatencyCdfs(out, results, config);
  await writeLoadCharts(out, results);
}

/** ttft_cdf.svg (served requests) and tbt_cdf.svg (every inter-token gap). */
async function writeLatencyCdfs(out: string, results: PdResult[], config: PdConfig): Promise<void> {
  await Deno.writeTextFile(
    `${out}/ttft_cdf.svg`,
    ttftCdfSvg(
      results.map((r) => {
        const values = Array.from(r.ttftS).filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
        return { label: r.label, values, servedShare: values.length / r.ttftS.length };
      }),
      { sloS: config.sloTtftS, title: `TTFT CDF, speed ${config.speed}` },
    ),
  );
  await Deno.writeTextFile(
    `${out}/tbt_cdf.svg`,
    ttftCdfSvg(
      results.map((r) => ({ label: r.label, values: r.tbt.cdfValues(400) })),
      {
        sloS: config.sloTbtS,
        title: `Time between tokens (every gap), speed ${config.speed}`,
        xLabel: "time between tokens (s, log scale)",
        yLabel: "fraction of inter-token gaps",
      },
    ),
  );
}

/** instance_load.svg, pool_load.svg and pool_load_zoom.svg. */
async function writeLoadCharts(out: string, results: PdResult[]): Promise<void> {
  await Deno.writeTextFile(
    `${out}/instance_load.svg`,
    instanceLoadSvg(results.map((r) => ({ label: r.label, ...r.timeline }))),
  );
  const panels = results.map((r) => ({ label: r.label, ...r.load }));
  await Deno.writeTextFile(`${out}/pool_load.svg`, poolLoadSvg(panels));
  // Five minutes from the middle of the run, where the oscillation can be told apart.
  const middleS = (results[0]?.load.prefill.length ?? 0) * (results[0]?.load.periodS ?? 0) / 2;
  await Deno.writeTextFile(
    `${out}/pool_load_zoom.svg`,
    poolLoadSvg(panels, {
      fromS: Math.max(0, Math.round(middleS - 150)),
      toS: Math.round(middleS + 150),
      title: "Prefill and decode pool load, five minutes mid-run (1 = at the SLO)",
    }),
  );
}

import { DEFAULT_DECODE_MODEL } from "../src/scheduling/decode_model.ts";
import { MOONCAKE_PREFILL_MODEL, prefillTimeS } from "../src/scheduling/prefill_model.ts";
import { isPolicyName, POLICY_NAMES, resolveTtftParams } from "../src/scheduling/registry.ts";
import type { PrefillModelCoefficients } from "../src/scheduling/types.ts";
import { instanceLoadSvg, ttftCdfSvg } from "../src/sim/charts.ts";
import { experimentReportText } from "../src/experiment/experiment_report.ts";
import type { ExperimentConfig } from "../src/config/schema.ts";
import {
  armPolicy,
  parseExperimentFile,
  simExperimentReport,
  splitTrace,
} from "../src/sim/experiment.ts";
import { type NumberReader, parsePdOptions, PD_USAGE, type PdCliOptions, runPd } from "./sim_pd.ts";
import { describeModel, resultsMarkdown, rounded } from "../src/sim/results_markdown.ts";
import {
  type AdmissionMode,
  type KvPoolMode,
  type PolicyRun,
  type SimConfig,
  type SimResult,
  simulate,
} from "../src/sim/simulator.ts";
import { type PolicySummary, summarize } from "../src/sim/summary.ts";
import { type BandSpec, DEFAULT_BANDS, leavingOut, parseBandShares } from "../src/sim/sim_bands.ts";
import { DEFAULT_SIM_QUEUE } from "../src/sim/sim_queue.ts";
import { QUEUE_ADMIT_WHEN, type QueueAdmitWhen } from "../src/scheduling/queue_rules.ts";
import { queueReport } from "../src/sim/queue_report.ts";
import { queueMarkdown } from "../src/sim/queue_markdown.ts";
import { parseMooncakeTrace, type TraceRequest, withoutFirst } from "../src/sim/trace.ts";
import { generateWorkload, parseWorkloadSpec, type WorkloadSpec } from "../src/sim/workloads.ts";

const USAGE = `Replays a Mooncake trace through the scheduling policies on a simulated cluster.

Usage: deno task sim --trace FILE [options]
       deno task sim --workload KIND[:key=value,...] [options]

  --trace FILE               Mooncake JSONL ({timestamp, input_length, output_length, hash_ids})
  --workload SPEC            a generated workload instead (src/sim/workloads.ts), seeded by
                             --seed: docs (Zipf-popular documents), chat (multi-turn sessions),
                             agents (loops over shared system prompts); e.g.
                             docs:documents=200,documentTokens=20000,zipf=1,rps=2,requests=2000
                             (any kind takes burstFactor, burstEveryS, burstS)
  --out DIR                  where results.json, results.md and the SVG charts go (default sim_out)
  --policies LIST            comma-separated NAME[:ADMISSION[:TOKENS]] (default
                             random,least_load,cache_aware,mooncake_ttft); names: ${
  POLICY_NAMES.join(", ")
}
  --admission MODE           default admission for NAME without one: off | ttft | load | queue
                             (default off; queue: what ttft refuses waits, docs/sim/queue/)
  --instances N              prefill instances (default 16)
  --speed X                  arrival-rate multiplier (default 1)
  --limit N                  replay only the first N requests (after --skip)
  --skip N                   leave out the first N requests (by arrival), the rest shifted to
                             start at 0: replay a part of a trace a tuning run did not see
  --drop I                   leave request I (0-based, after --skip and --limit) out: how much
                             a result moves when the trace barely changes
  --slo-ttft S               TTFT SLO in seconds (default 30)
  --slo-tbt S                TBT SLO in seconds, with decode instances (default 0.1)
  --seed N                   random seed (default 1)
  --cache-blocks N           KV cache per instance in blocks (default 6000: ~1 TB at 320 KB/token)
  --block-tokens N           tokens per trace block (default 512)
  --chunk-tokens N           chunked-prefill budget per iteration (default 8192)
  --kv-pool MODE             planned | always | off (default planned; see docs/sim/README.md)
  --kv-bytes-per-token N     default 327680 (LLaMA3-70B)
  --transfer-gbps X          pool transfer bandwidth in GB/s (default 85)
  --balancing-threshold X    mooncake_ttft transfers when pool/local prefix > X (default 1)
  --prefill-model a,b[,r[,c]] prefill-time coefficients (default 0.1157,0.000775,0.00264,0)
  --refine on|off            refine per-instance prefill models online (default on)
  --heterogeneity H          instance slowdowns uniform in [1-H, 1+H] (default 0)
  --engine-step-ms MS        what each engine iteration costs besides its tokens, however many
                             prompts it batches (default 0; a CPU engine's step overhead; not in
                             P/D mode)
  --decode-instances N       also simulate N decode instances (default 0: prefill only)
  --load-threshold-tokens N  load admission baseline (default: tokens the model prefills in the SLO)
  --load-filter-tokens N     Llumnix load filter for cache_aware / kv_hit_len (default off)
  --queue-ttl S              seconds a request may wait in the queue (default 30)
  --queue-max-requests N     requests the queue holds (default 256)
  --queue-max-prompt-tokens N prompt tokens the queue holds (default 2000000)
  --queue-admit WHEN         fits | idle | cause: when a waiting request goes (default cause;
                             the router's slo.queue.admitWhen)
  --bands SHARES             share of requests per priority band, band 0 first (default 0.2,0.8)
  --tenants N                tenants per band, equal weights (default 4)
  --experiment FILE          A/B experiment (JSON: the config's "experiment" object): split the
                             trace between its arms on one cluster and print the per-arm report
                             and verdict (experiment.json in --out); runs instead of --policies
                             unless --policies is given too
  --help                     this text
${PD_USAGE}`;

interface CliOptions {
  /** The trace file, or the generated workload's spec as written. */
  trace: string;
  workload?: WorkloadSpec;
  out: string;
  runs: PolicyRun[];
  /** The default admission mode (the experiment's arms use it). */
  admission: AdmissionMode;
  experiment?: string;
  limit?: number;
  /** The first requests left out (the rest shifted to start at 0). */
  skip?: number;
  /** A request left out of the trace (its index), to see how far results move. */
  drop?: number;
  config: Omit<SimConfig, "loadThresholdTokens"> & { loadThresholdTokens?: number };
  /** Prefill/decode mode (--prefill/--decode, --neutral): runs instead of the prefill-only one. */
  pd?: PdCliOptions;
}

/** Runs the simulator CLI; returns the process exit code. */
export async function runSimCli(args: string[]): Promise<number> {
  const options = cliOptions(args);
  if (typeof options === "number") return options;
  const inputs = await readInputs(options);
  if (typeof inputs === "number") return inputs;
  const { trace, experiment } = inputs;
  if (options.pd) {
    return await runPd(trace, options.config, options.pd, {
      out: options.out,
      command: ["deno task sim", ...args].join(" "),
      traceName: options.trace,
    });
  }
  const meanPrompt = trace.reduce((sum, r) => sum + r.inputLength, 0) / trace.length;
  const perTokenS = prefillTimeS(options.config.ttft.prefillModel, meanPrompt, 0) / meanPrompt;
  const config: SimConfig = {
    ...options.config,
    ...(inputs.bands ? { bands: inputs.bands } : {}),
    // Baseline: the queue the model drains within the SLO, in requests of the trace's mean size.
    loadThresholdTokens: options.config.loadThresholdTokens ??
      Math.floor(options.config.sloTtftS / perTokenS),
  };

  const { summaries, results } = runPolicies(trace, config, options.runs);
  const command = ["deno task sim", ...args].join(" ");
  if (experiment) {
    await runExperiment(trace, config, experiment, options, command);
    if (options.runs.length === 0) {
      console.log(`Wrote ${options.out}/experiment.json`);
      return 0;
    }
  }
  const settings = settingsTable(options, trace, meanPrompt, config);
  await writeResults(options.out, summaries, results, { settings, command, config });
  console.log(`Wrote ${options.out}/results.json, results.md, ttft_cdf.svg, instance_load.svg`);
  return 0;
}

/** The parsed options, or the exit code after printing the usage (0 for --help, 2 for errors). */
function cliOptions(args: string[]): CliOptions | number {
  try {
    const parsed = parseArgs(args);
    if (parsed === "help") {
      console.log(USAGE);
      return 0;
    }
    return parsed;
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
}

/**
 * The trace (less `--drop`'s request, the others keeping their bands) and the experiment file, or
 * the exit code after saying what went wrong.
 */
async function readInputs(
  options: CliOptions,
): Promise<
  { trace: TraceRequest[]; experiment: ExperimentConfig | undefined; bands?: BandSpec } | number
> {
  let text = "";
  try {
    if (!options.workload) text = await Deno.readTextFile(options.trace);
  } catch (error) {
    console.error(`Cannot read trace ${options.trace}: ${(error as Error).message}`);
    return 1;
  }
  let experiment: ExperimentConfig | undefined;
  if (options.experiment !== undefined) {
    try {
      experiment = parseExperimentFile(
        await Deno.readTextFile(options.experiment),
        options.experiment,
      );
    } catch (error) {
      console.error((error as Error).message);
      return error instanceof Deno.errors.NotFound ? 1 : 2;
    }
  }
  const skip = options.skip ?? 0;
  const read = options.limit === undefined ? undefined : skip + options.limit;
  const trace = withoutFirst(
    options.workload
      ? generateWorkload(options.workload, options.config.seed, options.config.blockTokens)
        .slice(0, read)
      : parseMooncakeTrace(text, { limit: read }),
    skip,
  );
  const { drop, config } = options;
  if (drop !== undefined && drop >= trace.length) {
    console.error(`--drop ${drop}: the trace has ${trace.length} requests`);
    return 2;
  }
  const bands = drop === undefined
    ? undefined
    : leavingOut(config.bands ?? DEFAULT_BANDS, trace.length, config.seed, drop);
  if (drop !== undefined) trace.splice(drop, 1);
  if (trace.length === 0) {
    console.error(`Trace ${options.trace} has no requests.`);
    return 1;
  }
  return { trace, experiment, bands };
}

/** Simulates each run in turn, printing a line per run. */
function runPolicies(
  trace: readonly TraceRequest[],
  config: SimConfig,
  runs: readonly PolicyRun[],
): { summaries: Record<string, PolicySummary>; results: SimResult[] } {
  const summaries: Record<string, PolicySummary> = {};
  const results: SimResult[] = [];
  for (const run of runs) {
    const started = performance.now();
    const result = simulate(trace, config, run);
    const summary = summarize(result, config.sloTtftS);
    summaries[run.label] = summary;
    results.push(result);
    printQueueLine(run, result, config.sloTtftS);
    console.log(
      `${run.label.padEnd(28)} mean ${summary.meanTtftS.toFixed(2)} s  p90 ${
        summary.p90TtftS.toFixed(2)
      } s  ` +
        `slo ${(summary.sloAttainment * 100).toFixed(1)}%  rejected ${summary.rejected}  ` +
        `hit ${summary.hitRatio.toFixed(3)}  (${
          ((performance.now() - started) / 1000).toFixed(1)
        } s)`,
    );
  }
  return { summaries, results };
}

/** With the queue: goodput, waits and expiries (printed before the run's usual line). */
function printQueueLine(run: PolicyRun, result: SimResult, sloTtftS: number): void {
  if (run.admission !== "queue") return;
  const q = queueReport(result, sloTtftS);
  const bands = q.bands.map((b) =>
    `band ${b.band} max wait ${Number.isNaN(b.maxWaitS) ? "-" : b.maxWaitS.toFixed(1)} s`
  );
  console.log(
    `${run.label.padEnd(28)} goodput ${q.goodputRps.toFixed(3)} req/s  queued ${q.queued}  ` +
      `expired ${q.rejectedByReason["queue_timeout"] ?? 0}  ` +
      `full ${q.rejectedByReason["queue_full"] ?? 0}  ${bands.join(", ")}`,
  );
}

/** Splits the trace between the experiment's arms on one cluster; prints and writes the report. */
async function runExperiment(
  trace: readonly TraceRequest[],
  config: SimConfig,
  experiment: ExperimentConfig,
  options: CliOptions,
  command: string,
): Promise<void> {
  await Deno.mkdir(options.out, { recursive: true });
  const split = splitTrace(trace, experiment, {
    blockTokens: config.blockTokens,
    seed: config.seed,
  });
  const result = simulate(trace, config, {
    label: "experiment",
    policy: armPolicy(experiment.arms[0].policy).name,
    admission: options.admission,
    arms: { policies: experiment.arms.map((arm) => armPolicy(arm.policy)), of: split.of },
  });
  const report = simExperimentReport(result, experiment, split);
  if (split.note) console.log(`Note: ${split.note}.`);
  console.log(experimentReportText(
    report,
    `Experiment on ${trace.length} requests, ${config.instances} instances (one cluster)`,
  ));
  await Deno.writeTextFile(
    `${options.out}/experiment.json`,
    JSON.stringify({ experiment, report, command, note: split.note ?? null }, rounded, 2) + "\n",
  );
}

type Settings = Record<string, string | number | boolean>;

/** The settings results.json and results.md list. */
function settingsTable(
  options: CliOptions,
  trace: readonly TraceRequest[],
  meanPrompt: number,
  config: SimConfig,
): Settings {
  return {
    trace: `${options.trace} (${trace.length} requests, mean prompt ${
      Math.round(meanPrompt)
    } tokens)`,
    instances: config.instances,
    speed: config.speed,
    seed: config.seed,
    "TTFT SLO (s)": config.sloTtftS,
    "KV pool": config.kvPool,
    "cache per instance (blocks)": config.cacheBlocks,
    "chunk tokens": config.chunkTokens,
    "prefill model (s, n in k tokens)": describeModel(config.engineModel),
    "transfer (GB/s)": config.ttft.transferBytesPerS / 1e9,
    "KV bytes per token": config.ttft.kvBytesPerToken,
    "balancing threshold": config.ttft.balancingThreshold,
    "online refinement": config.refine,
    heterogeneity: config.heterogeneity,
    "engine step (ms)": (config.engineStepS ?? 0) * 1000,
    "decode instances": config.decodeInstances,
    "load admission threshold (tokens)": config.loadThresholdTokens,
    ...(options.runs.some((run) => run.admission === "queue") ? queueSettings(config) : {}),
  };
}

function queueSettings(config: SimConfig): Settings {
  const queue = config.queue ?? DEFAULT_SIM_QUEUE;
  const bands = config.bands ?? DEFAULT_BANDS;
  return {
    "queue TTL (s)": queue.ttlS,
    "queue admits when": queue.admitWhen,
    "queue bounds (requests, prompt tokens)": `${queue.maxRequests}, ${queue.maxPromptTokens}`,
    "band shares": bands.shares.join(", "),
    "tenants per band": bands.tenants,
  };
}

/** results.json, results.md and the two charts. */
async function writeResults(
  out: string,
  summaries: Record<string, PolicySummary>,
  results: readonly SimResult[],
  { settings, command, config }: { settings: Settings; command: string; config: SimConfig },
): Promise<void> {
  await Deno.mkdir(out, { recursive: true });
  const json = {
    policies: summaries,
    settings,
    command,
    exampleDecisions: Object.fromEntries(results.map((r) => [r.label, r.exampleDecision])),
  };
  await Deno.writeTextFile(`${out}/results.json`, JSON.stringify(json, rounded, 2) + "\n");
  if (results.some((r) => r.admission === "queue")) await writeQueue(out, results, config, command);
  await Deno.writeTextFile(`${out}/results.md`, resultsMarkdown(summaries, { command, settings }));
  await Deno.writeTextFile(
    `${out}/ttft_cdf.svg`,
    ttftCdfSvg(
      results.map((r) => {
        const values = Array.from(r.ttftS).filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
        return { label: r.label, values, servedShare: values.length / r.ttftS.length };
      }),
      {
        sloS: config.sloTtftS,
        title: `TTFT CDF, ${config.instances} instances, speed ${config.speed}`,
      },
    ),
  );
  await Deno.writeTextFile(
    `${out}/instance_load.svg`,
    instanceLoadSvg(results.map((r) => ({ label: r.label, ...r.timeline }))),
  );
}

/** queue.json and queue.md: every run's goodput, waits and bands, for comparison. */
async function writeQueue(
  out: string,
  results: readonly SimResult[],
  config: SimConfig,
  command: string,
): Promise<void> {
  const reports = Object.fromEntries(
    results.map((r) => [r.label, queueReport(r, config.sloTtftS)]),
  );
  await Deno.writeTextFile(
    `${out}/queue.json`,
    JSON.stringify({ command, runs: reports }, rounded, 2) + "\n",
  );
  const text = [
    "# Flow-control queue",
    "",
    "```sh",
    command,
    "```",
    "",
    queueMarkdown(reports, config.sloTtftS),
  ];
  await Deno.writeTextFile(`${out}/queue.md`, text.join("\n"));
}

function parseArgs(args: string[]): CliOptions | "help" {
  const values = readFlags(args);
  if (values === "help") return "help";
  const problems: string[] = [];
  const known = new Set(USAGE.match(/--[a-z-]+/g)!.map((flag) => flag.slice(2)));
  for (const key of values.keys()) if (!known.has(key)) problems.push(`unknown option --${key}`);
  // --tbt-slo is the P/D mode's name for --slo-tbt.
  if (values.has("tbt-slo") && !values.has("slo-tbt")) {
    values.set("slo-tbt", values.get("tbt-slo")!);
  }
  const num = numberReader(values, problems);
  const workloadText = values.get("workload");
  const trace = values.get("trace") ?? (workloadText && `workload ${workloadText}`);
  if ((values.get("trace") === undefined) === (workloadText === undefined)) {
    problems.push("give one of --trace FILE and --workload SPEC");
  }
  let workload: WorkloadSpec | undefined;
  try {
    if (workloadText !== undefined) workload = parseWorkloadSpec(workloadText);
  } catch (error) {
    problems.push((error as Error).message);
  }
  const admission = (values.get("admission") ?? "off") as AdmissionMode;
  if (!ADMISSION_MODES.includes(admission)) {
    problems.push(`--admission must be off, ttft, load or queue`);
  }
  const kvPool = (values.get("kv-pool") ?? "planned") as KvPoolMode;
  if (!["planned", "always", "off"].includes(kvPool)) {
    problems.push(`--kv-pool must be planned, always or off`);
  }
  const queueAdmit = (values.get("queue-admit") ?? DEFAULT_SIM_QUEUE.admitWhen) as QueueAdmitWhen;
  if (!QUEUE_ADMIT_WHEN.includes(queueAdmit)) {
    problems.push(`--queue-admit must be ${QUEUE_ADMIT_WHEN.join(", ")}`);
  }
  const refine = values.get("refine") ?? "on";
  if (!["on", "off"].includes(refine)) problems.push(`--refine must be on or off`);
  const prefillModel = parsePrefillModel(values.get("prefill-model"), problems);
  const limitRaw = values.get("limit");
  const limit = limitRaw === undefined ? undefined : num("limit", 0, count, "a positive integer");
  const skipRaw = values.get("skip");
  const skip = skipRaw === undefined
    ? undefined
    : num("skip", 0, (v) => Number.isInteger(v) && v >= 0, "a non-negative integer");
  const dropRaw = values.get("drop");
  const drop = dropRaw === undefined
    ? undefined
    : num("drop", 0, (v) => Number.isInteger(v) && v >= 0, "a non-negative integer");
  const experiment = values.get("experiment");
  // With --experiment alone, only the experiment runs.
  const policies = values.get("policies") ??
    (experiment === undefined ? "random,least_load,cache_aware,mooncake_ttft" : "");
  const pd = parsePdOptions(values, num, problems);
  if (pd && experiment !== undefined) problems.push("--experiment does not combine with P/D mode");
  // The P/D simulator's engines have no step cost (src/sim/pd_simulator.ts): refused, not ignored.
  if (pd && values.has("engine-step-ms")) {
    problems.push("--engine-step-ms does not combine with P/D mode");
  }
  if (values.has("drop") && experiment !== undefined) {
    problems.push("--drop does not combine with --experiment (its arms are drawn by index)");
  }
  const runs = pd ? [] : parseRuns(policies, admission, problems);
  const config = simConfigOf(values, num, {
    kvPool,
    prefillModel,
    refine: refine === "on",
    queueAdmit,
  });
  if (problems.length > 0) throw new Error(`Cannot run the simulator:\n- ${problems.join("\n- ")}`);
  return {
    trace: trace!,
    workload,
    out: values.get("out") ?? "sim_out",
    runs,
    admission,
    experiment,
    limit,
    skip,
    drop,
    config,
    pd,
  };
}

/** `--name value` and `--name=value` pairs, or "help". */
function readFlags(args: string[]): Map<string, string> | "help" {
  const values = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--help" || arg === "-h") return "help";
    if (!arg.startsWith("--")) {
      throw new Error(`Unexpected argument "${arg}": options start with --.`);
    }
    const eq = arg.indexOf("=");
    if (eq > 0) values.set(arg.slice(2, eq), arg.slice(eq + 1));
    else if (i + 1 < args.length) values.set(arg.slice(2), args[++i]);
    else throw new Error(`Option ${arg} needs a value.`);
  }
  return values;
}

/** Reads numeric options, adding a problem for each value that fails its check. */
function numberReader(values: ReadonlyMap<string, string>, problems: string[]): NumberReader {
  return (key, fallback, check, what) => {
    const raw = values.get(key);
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || !check(value)) {
      problems.push(`--${key} must be ${what} (got "${raw}")`);
    }
    return value;
  };
}

const ADMISSION_MODES: readonly AdmissionMode[] = ["off", "ttft", "load", "queue"];
const positive = (v: number) => v > 0;
const count = (v: number) => Number.isInteger(v) && v >= 1;

/** `--bands 0.2,0.8`, or the default split; a bad value is reported through `num`'s problems. */
function bandShares(raw: string | undefined, num: NumberReader): number[] {
  if (raw === undefined) return [...DEFAULT_BANDS.shares];
  try {
    return parseBandShares(raw);
  } catch {
    num("bands", 0, () => false, "positive shares like 0.2,0.8");
    return [...DEFAULT_BANDS.shares];
  }
}

/** `--prefill-model a,b[,r[,c]]`, or the Mooncake model when absent or invalid. */
function parsePrefillModel(raw: string | undefined, problems: string[]): PrefillModelCoefficients {
  if (raw === undefined) return { ...MOONCAKE_PREFILL_MODEL };
  const parts = raw.split(",").map(Number);
  if (parts.length < 2 || parts.length > 4 || parts.some((v) => !(Number.isFinite(v) && v >= 0))) {
    problems.push(`--prefill-model must be a,b[,r[,c]] with non-negative numbers (got "${raw}")`);
    return { ...MOONCAKE_PREFILL_MODEL };
  }
  return {
    linear: parts[0],
    quadratic: parts[1],
    cachedLinear: parts[2] ?? 0,
    constant: parts[3] ?? 0,
  };
}

/** `--policies`: comma-separated NAME[:ADMISSION[:TOKENS]], ADMISSION defaulting to `admission`. */
function parseRuns(policies: string, admission: AdmissionMode, problems: string[]): PolicyRun[] {
  const runs: PolicyRun[] = [];
  for (const spec of policies ? policies.split(",") : []) {
    const [policy, mode = admission, threshold] = spec.trim().split(":");
    if (!isPolicyName(policy)) {
      problems.push(`unknown policy "${policy}" (valid: ${POLICY_NAMES.join(", ")})`);
      continue;
    }
    if (!ADMISSION_MODES.includes(mode as AdmissionMode)) {
      problems.push(`"${spec}": admission must be off, ttft, load or queue`);
    }
    if (threshold !== undefined && !(Number(threshold) > 0)) {
      problems.push(`"${spec}": threshold must be positive`);
    }
    runs.push({
      label: spec.trim(),
      policy,
      admission: mode as AdmissionMode,
      ...(threshold === undefined ? {} : { loadThresholdTokens: Number(threshold) }),
    });
  }
  return runs;
}

/** The cluster and model options (numbers read in the order problems are listed). */
function simConfigOf(
  values: ReadonlyMap<string, string>,
  num: NumberReader,
  parsed: {
    kvPool: KvPoolMode;
    prefillModel: PrefillModelCoefficients;
    refine: boolean;
    queueAdmit: QueueAdmitWhen;
  },
): CliOptions["config"] {
  const loadThresholdRaw = values.get("load-threshold-tokens");
  const loadFilterRaw = values.get("load-filter-tokens");
  return {
    instances: num("instances", 16, count, "a positive integer"),
    cacheBlocks: num("cache-blocks", 6000, count, "a positive integer"),
    chunkTokens: num("chunk-tokens", 8192, count, "a positive integer"),
    blockTokens: num("block-tokens", 512, count, "a positive integer"),
    speed: num("speed", 1, positive, "a positive number"),
    seed: num("seed", 1, Number.isInteger, "an integer"),
    sloTtftS: num("slo-ttft", 30, positive, "a positive number"),
    sloTbtS: num("slo-tbt", 0.1, positive, "a positive number"),
    kvPool: parsed.kvPool,
    ttft: resolveTtftParams({
      prefillModel: parsed.prefillModel,
      kvBytesPerToken: num("kv-bytes-per-token", 327_680, positive, "a positive number"),
      transferBytesPerS: num("transfer-gbps", 85, positive, "a positive number") * 1e9,
      balancingThreshold: num("balancing-threshold", 1, (v) => v >= 1, "at least 1"),
    }),
    engineModel: parsed.prefillModel,
    heterogeneity: num("heterogeneity", 0, (v) => v >= 0 && v < 1, "in [0, 1)"),
    engineStepS: num("engine-step-ms", 0, (v) => v >= 0, "a non-negative number") / 1000,
    refine: parsed.refine,
    decodeInstances: num(
      "decode-instances",
      0,
      (v) => Number.isInteger(v) && v >= 0,
      "a non-negative integer",
    ),
    decodeModel: { ...DEFAULT_DECODE_MODEL },
    loadThresholdTokens: loadThresholdRaw === undefined
      ? undefined
      : num("load-threshold-tokens", 0, positive, "a positive number"),
    loadFilterTokens: loadFilterRaw === undefined
      ? undefined
      : num("load-filter-tokens", 0, positive, "a positive number"),
    timelinePoints: 200,
    queue: {
      ttlS: num("queue-ttl", DEFAULT_SIM_QUEUE.ttlS, positive, "a positive number"),
      admitWhen: parsed.queueAdmit,
      maxRequests: num(
        "queue-max-requests",
        DEFAULT_SIM_QUEUE.maxRequests,
        count,
        "a positive integer",
      ),
      maxPromptTokens: num(
        "queue-max-prompt-tokens",
        DEFAULT_SIM_QUEUE.maxPromptTokens,
        count,
        "a positive integer",
      ),
    },
    bands: {
      shares: bandShares(values.get("bands"), num),
      tenants: num("tenants", DEFAULT_BANDS.tenants, count, "a positive integer"),
    },
  };
}

if (import.meta.main) Deno.exit(await runSimCli(Deno.args));

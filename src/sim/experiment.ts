import { formatPath } from "../config/load.ts";
import { type ExperimentConfig, ExperimentSchema } from "../config/schema.ts";
import { assignArm } from "../experiment/assign.ts";
import { parseExperimentKey } from "../experiment/experiment_key.ts";
import { type ExperimentReport, ExperimentTally } from "../experiment/experiment_report.ts";
import type { AssignmentKind } from "../contracts.ts";
import { createPolicy, type PolicyParams } from "../scheduling/registry.ts";
import { seededRandom } from "./rng.ts";
import type { SimResult } from "./simulator.ts";
import type { TraceRequest } from "./trace.ts";

/** A trace split between the arms of an experiment, the way the live gateway splits traffic. */
export interface TraceSplit {
  /** Arm index per request (trace order). */
  of: Int32Array;
  kinds: AssignmentKind[];
  /** Statistics bucket per request (as the gateway derives it from the key). */
  clusters: Int32Array;
  /** Set when the experiment's key cannot be read from a trace and a proxy stands in. */
  note?: string;
}

/**
 * Validates an experiment file: `{"experiment": {...}}` (a config excerpt) or the experiment
 * object itself. Throws with every problem, policy names and parameters included.
 */
export function parseExperimentFile(text: string, file: string): ExperimentConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new Error(`Cannot parse experiment file ${file}: ${(error as Error).message}`);
  }
  const candidate = raw && typeof raw === "object" && "experiment" in raw
    ? (raw as { experiment: unknown }).experiment
    : raw;
  const parsed = ExperimentSchema.safeParse(candidate);
  if (!parsed.success) {
    throw new Error(
      `Invalid experiment in ${file}:\n- ${
        parsed.error.issues.map((i) => `${formatPath(i.path)}: ${i.message}`).join("\n- ")
      }`,
    );
  }
  const problems: string[] = [];
  parsed.data.arms.forEach((arm, a) => {
    const { name, params } = armPolicy(arm.policy);
    try {
      createPolicy(name, params as PolicyParams);
    } catch (error) {
      problems.push(`arms[${a}].policy: ${(error as Error).message}`);
    }
  });
  if (problems.length) {
    throw new Error(`Invalid experiment in ${file}:\n- ${problems.join("\n- ")}`);
  }
  return parsed.data;
}

export function armPolicy(
  spec: ExperimentConfig["arms"][number]["policy"],
): { name: string; params: Record<string, unknown> } {
  return typeof spec === "string" ? { name: spec, params: {} } : spec;
}

/**
 * Assigns every trace request an arm with the gateway's assignment function. The trace has no
 * headers, users or API keys: every sticky key form uses the `prefix` proxy, the block id that
 * ends the first `prefixTokens` tokens (block ids are prefix-chained, so it names the whole
 * opening: one conversation, one arm).
 */
export function splitTrace(
  trace: readonly TraceRequest[],
  experiment: ExperimentConfig,
  options: { blockTokens: number; seed: number },
): TraceSplit {
  const key = parseExperimentKey(experiment.key);
  const random = seededRandom(options.seed ^ 0xab7e57);
  const depth = Math.max(1, Math.ceil(experiment.prefixTokens / options.blockTokens));
  const of = new Int32Array(trace.length);
  const kinds: AssignmentKind[] = [];
  const clusters = new Int32Array(trace.length);
  trace.forEach((request, i) => {
    let value: string | null | undefined;
    if (key.kind === "random") value = null;
    else if (request.hashIds.length === 0) value = undefined;
    else value = `block:${request.hashIds[Math.min(depth, request.hashIds.length) - 1]}`;
    const { index, kind, cluster } = assignArm(experiment.arms, value, {
      salt: experiment.salt,
      fallback: experiment.fallback,
      random,
    });
    of[i] = index;
    kinds.push(kind);
    clusters[i] = cluster;
  });
  const note = key.kind === "prefix" || key.kind === "random"
    ? undefined
    : `the trace has no ${
      key.kind === "header"
        ? `"${key.name}" header`
        : key.kind === "user"
        ? "user field"
        : "API keys"
    }: requests are keyed by the prompt's first ${experiment.prefixTokens} tokens instead ` +
      `(key "prefix")`;
  return { of, kinds, clusters, note };
}

/** The experiment report of a simulated split: the same statistics and verdict as live. */
export function simExperimentReport(
  result: SimResult,
  experiment: ExperimentConfig,
  split: TraceSplit,
): ExperimentReport {
  const tally = new ExperimentTally(
    experiment.arms.map((arm) => ({
      name: arm.name,
      policy: armPolicy(arm.policy).name,
      weight: arm.weight,
    })),
  );
  for (let i = 0; i < result.ttftS.length; i++) {
    const ttft = result.ttftS[i];
    const served = !Number.isNaN(ttft);
    tally.record({
      arm: experiment.arms[split.of[i]].name,
      outcome: served ? "served" : result.instance[i] < 0 ? "rejected" : "other",
      ttftS: served ? ttft : undefined,
      assignment: split.kinds[i],
      cluster: split.clusters[i],
      promptTokens: served ? result.promptTokens[i] : undefined,
      hitTokens: served ? result.reusedTokens[i] : undefined,
    });
  }
  return tally.report();
}

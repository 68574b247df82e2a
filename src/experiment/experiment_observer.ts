import type { RequestObserver, RequestRecord } from "../contracts.ts";
import type { ExperimentArms, LiveExperiment } from "./experiment_arms.ts";
import { type ExperimentReport, ExperimentTally } from "./experiment_report.ts";
import type { ArmObservation } from "./arm_stats.ts";
import { predictedReuseTokens, reportsReuse } from "../scheduling/predicted_reuse.ts";

/** `GET /admin/experiments`: one entry per model with a running experiment. */
export interface ModelExperimentReport extends ExperimentReport {
  model: string;
  /** Bumped by every arm change; the statistics cover this version only. */
  version: number;
  /** What set the current arms: the config at start, a reload, or the admin API. */
  source: string;
  since: string;
  key: string;
  fallback: string;
  overrideHeader: string | null;
  /** What the TTFT figures cover (said with every report, since it surprises). */
  ttftBasis: typeof TTFT_BASIS;
}

/** A non-streamed answer's first byte comes after the whole generation: it has no TTFT. */
export const TTFT_BASIS =
  "streamed requests only: a non-streamed answer has no observable first token" as const;

/**
 * Records finished requests per model and arm for the running version of each experiment (a
 * change of arms starts fresh statistics: mixing two policies under one arm name would lie).
 */
export class ExperimentStats implements RequestObserver {
  readonly #arms: ExperimentArms;
  readonly #tallies = new Map<string, { version: number; tally: ExperimentTally }>();
  /** Requests that finished after their experiment version was replaced (not counted). */
  staleRecords = 0;

  constructor(arms: ExperimentArms) {
    this.#arms = arms;
  }

  onFinished(record: RequestRecord): void {
    if (!record.experiment) return;
    const live = this.#arms.get(record.model);
    if (!live || live.version !== record.experiment.version) {
      this.staleRecords++;
      return;
    }
    this.#tally(live).record(observationOf(record));
  }

  /** The report of every running experiment (or of one model). */
  report(model?: string): ModelExperimentReport[] {
    const live = this.#arms.list().filter((e) => model === undefined || e.model === model);
    for (const name of [...this.#tallies.keys()]) {
      if (!this.#arms.get(name)) this.#tallies.delete(name);
    }
    return live.map((experiment) => ({
      model: experiment.model,
      version: experiment.version,
      source: experiment.source,
      since: new Date(experiment.changedAtWallMs).toISOString(),
      key: experiment.config.key,
      fallback: experiment.config.fallback,
      overrideHeader: experiment.config.overrideHeader ?? null,
      ttftBasis: TTFT_BASIS,
      ...this.#tally(experiment).report(),
    }));
  }

  #tally(live: LiveExperiment): ExperimentTally {
    let entry = this.#tallies.get(live.model);
    if (!entry || entry.version !== live.version) {
      entry = {
        version: live.version,
        tally: new ExperimentTally(
          live.arms.map((a) => ({ name: a.name, policy: a.policy.name, weight: a.weight })),
        ),
      };
      this.#tallies.set(live.model, entry);
    }
    return entry.tally;
  }
}

const ERROR_OUTCOMES = new Set<string>([
  "no_instance",
  "upstream_failed",
  "upstream_timeout",
  "midstream_failure",
  "internal_error",
]);

/** A finished request as the experiment statistics see it. */
function observationOf(record: RequestRecord): ArmObservation {
  let outcome: ArmObservation["outcome"] = "other";
  if (record.outcome === "ok") outcome = "served";
  else if (record.outcome === "rejected") outcome = "rejected";
  else if (record.outcome === "client_aborted") outcome = "aborted";
  else if (
    ERROR_OUTCOMES.has(record.outcome) ||
    (record.outcome === "upstream_error_status" && record.status >= 500)
  ) outcome = "error";
  const observation: ArmObservation = {
    arm: record.arm,
    outcome,
    ttftS: record.ttftS,
    assignment: record.experiment?.assignment,
    cluster: record.experiment?.cluster,
  };
  const plan = record.plan;
  if (plan && record.instanceId) {
    observation.promptTokens = plan.promptTokens;
    // A disaggregated request's hits are its prefill instance's (as its engine reports them).
    observation.hitTokens = predictedReuseTokens(
      plan,
      record.prefillInstanceId ?? record.instanceId,
    );
  }
  const usage = record.usage;
  const comparable = !plan || reportsReuse(plan, record);
  if (comparable && usage.cachedTokens !== undefined && usage.promptTokens !== undefined) {
    observation.engineCachedTokens = usage.cachedTokens;
    observation.enginePromptTokens = usage.promptTokens;
  }
  return observation;
}

/**
 * The JSON the dashboard page renders (`GET /dashboard/data`): per model, every instance's
 * health, load and hit ratios, the KV store's state; TTFT percentiles per arm over time; the
 * last decisions with their score terms. `assembleDashboardData` is pure (plain inputs in, JSON
 * out); `readDashboardInput` reads those inputs from the live sources.
 */
import type { InstanceStatus } from "../cluster/model_cluster.ts";
import { type AgreementSnapshot, UNKNOWN_AGREEMENT } from "../kv/kv_agreement.ts";
import type { StoreHealthSnapshot } from "../kv/store_health.ts";
import type { DecisionEntry } from "./decision_log.ts";
import type { DashboardTraffic, InstanceTrafficTotals } from "./dashboard_traffic.ts";
import type { TtftTimeline, TtftTimelineSnapshot } from "./ttft_timeline.ts";

export interface DashboardModelInput {
  name: string;
  policy: string;
  tokenizer: string;
  instances: InstanceStatus[];
  /** The KV store, when the model has one. */
  store?: { url: string; health: StoreHealthSnapshot };
  predictedIndexKeys: number;
  /** Each instance's KV agreement (absent: unknown). */
  kvAgreement?: Record<string, AgreementSnapshot>;
  /** The model's running A/B experiment (absent: every request gets `policy`). */
  experiment?: {
    version: number;
    key: string;
    arms: { name: string; policy: string; weight: number }[];
  };
  /** Requests waiting in its flow-control queue, per band (absent or empty: none). */
  queue?: ReadonlyMap<number, number>;
}

/** A model's flow-control queue on the page: who waits now, by band (most urgent first). */
export interface DashboardQueue {
  waiting: number;
  bands: { priority: number; waiting: number }[];
}

export interface DashboardInput {
  /** Wall-clock ms. */
  wallNowMs: number;
  /** Monotonic ms (the clock of engine reports and the store's down-window). */
  nowMs: number;
  models: DashboardModelInput[];
  traffic: InstanceTrafficTotals[];
  ttft: TtftTimelineSnapshot;
  decisions: DecisionEntry[];
}

export interface DashboardInstance {
  id: string;
  url: string;
  kvHost: string | null;
  role: string;
  engine: string;
  origin: string;
  healthy: boolean;
  breaker: string;
  draining: boolean;
  /** Requests proxied to it right now. */
  active: number;
  /** The reconciled load the policies see. */
  waitingPrefillTokens: number;
  runningRequests: number;
  loadBasis: string;
  loadTerms: Record<string, number>;
  engineReport: {
    waitingRequests: number;
    runningRequests: number;
    pendingPrefillTokens: number | null;
    kvUsage: number | null;
    ageS: number;
    usable: boolean;
  } | null;
  engineReportError: string | null;
  probeFailures: number;
  recentTtft: { count: number; p50: number | null; p90: number | null; mean: number | null };
  requests: number;
  promptTokens: number;
  predictedLocalHitTokens: number;
  engineCachedTokens: number;
  /** predicted local hit tokens / prompt tokens dispatched to it; null before any prompt token. */
  predictedHitRatio: number | null;
  /**
   * engine cached tokens / prompt tokens of the requests whose engine reported usage (the
   * definition /admin/experiments uses); null until an engine reported cached tokens.
   */
  engineHitRatio: number | null;
  /** Predicted hits against the engine's reuse: the state and its window's counts. */
  kvAgreement: AgreementSnapshot;
}

export interface DashboardStore {
  url: string;
  state: string;
  /** Seconds left in the down-window, when down or probing. */
  downForS: number | null;
  consecutiveFailures: number;
  lastError: string | null;
  counters: Pick<
    StoreHealthSnapshot,
    "successes" | "failures" | "deadlines" | "skipped" | "probes" | "markedDown" | "recovered"
  >;
}

/** A running experiment as the page's header shows it: each arm's policy and share of keys. */
export interface DashboardExperiment {
  version: number;
  /** What requests are assigned by (`prefix`, `header:NAME`, ...). */
  key: string;
  /** `share`: the arm's weight over the arms' total (the expected split of keys). */
  arms: { name: string; policy: string; weight: number; share: number }[];
}

export interface DashboardModel {
  name: string;
  /** The model's own policy (the arms' policies replace it while `experiment` runs). */
  policy: string;
  tokenizer: string;
  experiment: DashboardExperiment | null;
  store: DashboardStore | null;
  predictedIndexKeys: number;
  instances: DashboardInstance[];
  queue: DashboardQueue;
  totals: {
    requests: number;
    promptTokens: number;
    predictedLocalHitTokens: number;
    predictedHitRatio: number | null;
    healthyInstances: number;
  };
}

export interface DashboardData {
  generatedAt: number;
  models: DashboardModel[];
  ttft: TtftTimelineSnapshot;
  decisions: DecisionEntry[];
}

export function assembleDashboardData(input: DashboardInput): DashboardData {
  const traffic = new Map(input.traffic.map((t) => [`${t.model}\0${t.instance}`, t]));
  const models = input.models.map((model): DashboardModel => {
    const instances = model.instances.map((status) =>
      dashboardInstance(
        status,
        traffic.get(`${model.name}\0${status.id}`),
        model.kvAgreement?.[status.id] ?? UNKNOWN_AGREEMENT,
        input.nowMs,
      )
    );
    const promptTokens = sum(instances, (i) => i.promptTokens);
    const hits = sum(instances, (i) => i.predictedLocalHitTokens);
    return {
      name: model.name,
      policy: model.policy,
      tokenizer: model.tokenizer,
      experiment: model.experiment ? dashboardExperiment(model.experiment) : null,
      store: model.store ? dashboardStore(model.store, input.nowMs) : null,
      predictedIndexKeys: model.predictedIndexKeys,
      instances,
      queue: dashboardQueue(model.queue),
      totals: {
        requests: sum(instances, (i) => i.requests),
        promptTokens,
        predictedLocalHitTokens: hits,
        predictedHitRatio: ratio(hits, promptTokens),
        healthyInstances: instances.filter((i) => i.healthy).length,
      },
    };
  });
  return { generatedAt: input.wallNowMs, models, ttft: input.ttft, decisions: input.decisions };
}

function dashboardQueue(lengths: ReadonlyMap<number, number> | undefined): DashboardQueue {
  const bands = [...(lengths ?? new Map<number, number>())]
    .map(([priority, waiting]) => ({ priority, waiting }))
    .sort((a, b) => a.priority - b.priority);
  return { waiting: sum(bands, (b) => b.waiting), bands };
}

function dashboardInstance(
  status: InstanceStatus,
  traffic: InstanceTrafficTotals | undefined,
  kvAgreement: AgreementSnapshot,
  nowMs: number,
): DashboardInstance {
  const report = status.engineReport?.report;
  const promptTokens = traffic?.promptTokens ?? 0;
  const predicted = traffic?.predictedLocalHitTokens ?? 0;
  const cached = traffic?.engineCachedTokens ?? 0;
  return {
    id: status.id,
    url: status.url,
    kvHost: status.kvHost ?? null,
    role: status.role,
    engine: status.engine,
    origin: status.origin,
    healthy: status.healthy,
    breaker: status.breaker,
    draining: status.draining,
    active: status.active,
    waitingPrefillTokens: status.load.waitingPrefillTokens,
    runningRequests: status.load.runningRequests,
    loadBasis: status.load.basis,
    loadTerms: { ...status.load.terms },
    engineReport: report
      ? {
        waitingRequests: report.waitingRequests,
        runningRequests: report.runningRequests,
        pendingPrefillTokens: report.pendingPrefillTokens ?? null,
        kvUsage: report.kvUsage ?? null,
        ageS: Math.max(0, (nowMs - report.observedAtMs) / 1000),
        usable: status.engineReport!.usable,
      }
      : null,
    engineReportError: status.engineReport?.lastError ?? null,
    probeFailures: status.probeFailures,
    recentTtft: {
      count: status.recentTtftS.count,
      p50: status.recentTtftS.p50 ?? null,
      p90: status.recentTtftS.p90 ?? null,
      mean: status.recentTtftS.mean ?? null,
    },
    requests: traffic?.requests ?? 0,
    promptTokens,
    predictedLocalHitTokens: predicted,
    engineCachedTokens: cached,
    predictedHitRatio: ratio(predicted, promptTokens),
    engineHitRatio: traffic?.engineReports
      ? ratio(cached, traffic.engineReportedPromptTokens)
      : null,
    kvAgreement: { ...kvAgreement },
  };
}

function dashboardExperiment(
  experiment: NonNullable<DashboardModelInput["experiment"]>,
): DashboardExperiment {
  const total = sum(experiment.arms, (a) => a.weight);
  return {
    version: experiment.version,
    key: experiment.key,
    arms: experiment.arms.map((a) => ({
      name: a.name,
      policy: a.policy,
      weight: a.weight,
      share: total > 0 ? a.weight / total : 1 / experiment.arms.length,
    })),
  };
}

function dashboardStore(
  { url, health }: { url: string; health: StoreHealthSnapshot },
  nowMs: number,
): DashboardStore {
  const { successes, failures, deadlines, skipped, probes, markedDown, recovered } = health;
  return {
    url,
    state: health.state,
    downForS: health.downUntil !== undefined
      ? Math.max(0, (health.downUntil - nowMs) / 1000)
      : null,
    consecutiveFailures: health.consecutiveFailures,
    lastError: health.lastError ?? null,
    counters: { successes, failures, deadlines, skipped, probes, markedDown, recovered },
  };
}

function ratio(part: number, whole: number): number | null {
  return whole > 0 ? part / whole : null;
}

function sum<T>(items: T[], read: (item: T) => number): number {
  return items.reduce((total, item) => total + read(item), 0);
}

/** Where the dashboard's inputs live: the served models plus the dashboard's own observers. */
export interface DashboardSources {
  /** Every served model's live state (in memory: no I/O). */
  models: () => DashboardModelInput[];
  traffic: DashboardTraffic;
  timeline: TtftTimeline;
  decisions: { recent(limit: number): DecisionEntry[] };
  /** Wall-clock and monotonic milliseconds. */
  wallNow: () => number;
  now: () => number;
}

/** Reads the live state (no I/O: everything is in memory) into a `DashboardInput`. */
export function readDashboardInput(sources: DashboardSources, decisions: number): DashboardInput {
  const wallNowMs = sources.wallNow();
  return {
    wallNowMs,
    nowMs: sources.now(),
    models: sources.models(),
    traffic: sources.traffic.all(),
    ttft: sources.timeline.snapshot(wallNowMs),
    decisions: decisions > 0 ? sources.decisions.recent(decisions) : [],
  };
}

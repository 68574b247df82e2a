import { PooledAsyncTokenizer } from "../tokenize/pooled_async_tokenizer.ts";
import type { InstanceGaugeSample, ModelGaugeSample } from "../telemetry/metrics.ts";
import type { ModelRuntime } from "./model_runtime.ts";

/** Per-instance gauges for /metrics, read from the live runtimes at scrape time. */
export function instanceSamples(
  runtimes: readonly ModelRuntime[],
  now: () => number,
): InstanceGaugeSample[] {
  return runtimes.flatMap((runtime) =>
    runtime.cluster.status().map((status) => {
      const local = runtime.cluster.account.load(status.id);
      const report = status.engineReport?.report;
      const mirror = runtime.engineCaches.get(status.id);
      return {
        model: runtime.config.name,
        instance: status.id,
        healthy: status.healthy,
        breakerState: status.breaker,
        draining: status.draining,
        inflightPrefillTokens: local.prefillTokens,
        inflightPrefillRequests: local.prefillRequests,
        inflightDecodeRequests: local.decodeRequests,
        estimatedWaitingPrefillTokens: status.load.waitingPrefillTokens,
        reportedWaitingRequests: report?.waitingRequests,
        reportedRunningRequests: report?.runningRequests,
        reportedPendingTokens: report?.pendingPrefillTokens,
        reportAgeSeconds: report ? (now() - report.observedAtMs) / 1000 : undefined,
        reportStale: status.engineReport ? !status.engineReport.usable : undefined,
        probeFailures: status.probeFailures,
        kvAgreement: runtime.agreement.state(status.id),
        engineMirror: mirror && {
          exact: mirror.state === "exact",
          gaps: mirror.counters.gaps,
          restarts: mirror.counters.restarts,
          disconnects: mirror.counters.disconnects,
          resyncFailed: mirror.counters.resyncFailed,
        },
      };
    })
  );
}

/** Per-model gauges for /metrics. */
export function modelSamples(runtimes: readonly ModelRuntime[]): ModelGaugeSample[] {
  return runtimes.map((runtime) => ({
    model: runtime.config.name,
    storeDown: runtime.store ? runtime.store.health.state !== "up" : false,
    expiredLeases: runtime.cluster.account.expiredTotal,
    predictedIndexKeys: runtime.predicted?.size ?? 0,
    discoveryRefused: runtime.discoveryRefused,
    tokenizerWorkers: workersOf(runtime.tokenizer),
    poolMirror: runtime.poolMirror && {
      exact: runtime.poolMirror.state === "exact",
      keys: runtime.poolMirror.size,
      answered: runtime.poolMirror.lookups.answered,
      keysAgreed: runtime.poolMirror.lookups.keysAgreed,
      keysDisagreed: runtime.poolMirror.lookups.keysDisagreed,
      snapshots: runtime.poolMirror.counters.snapshots,
      gaps: runtime.poolMirror.counters.gaps,
    },
    engineMirrors: runtime.engineCaches.size === 0 ? undefined : {
      configured: runtime.engineCaches.size,
      exact: [...runtime.engineCaches.entries()].filter(([, i]) => i.state === "exact").length,
    },
  }));
}

function workersOf(tokenizer: unknown): ModelGaugeSample["tokenizerWorkers"] {
  if (!(tokenizer instanceof PooledAsyncTokenizer)) return undefined;
  const pool = tokenizer.pool;
  return { started: pool.size, ready: pool.readyWorkers, replaced: pool.replacedWorkers };
}

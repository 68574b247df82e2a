import type { DispatchPlan, RequestObserver, RequestRecord } from "../contracts.ts";
import type { GatewayMetrics } from "./metrics.ts";
import { predictedReuseTokens, reportsReuse } from "../scheduling/predicted_reuse.ts";

interface Labels {
  model: string;
  instance: string;
  arm: string;
}

/** Turns each finished request into Prometheus series (labels: model, instance, arm). */
export function metricsObserver(metrics: GatewayMetrics): RequestObserver {
  return {
    onFinished(record: RequestRecord) {
      const labels = {
        model: record.model || "unknown",
        instance: record.instanceId ?? "none",
        arm: record.arm || "none",
      };
      countRequest(metrics, record, labels);
      if (record.tenant) {
        const result = record.rateLimited ? `rate_limited_${record.rateLimited}` : "admitted";
        metrics.tenantRequests.inc({ tenant: record.tenant, result });
      }
      if (record.queue) {
        const { priority, cause } = record.queue;
        const queued = { model: labels.model, priority: String(priority), cause };
        metrics.queueExits.inc({ ...queued, result: record.queue.result });
        // A full queue refused it at once: it never waited.
        if (record.queue.result !== "full") metrics.queueWait.observe(queued, record.queue.waitedS);
      }
      const plan = record.plan;
      if (!plan) return;
      observeStages(metrics, plan, labels.model);
      if (plan.kvLoadOnly) metrics.kvLoadOnlyDispatches.inc({ model: labels.model });
      const local = plan.decode?.localPrefill;
      if (local) {
        metrics.localPrefills.inc({
          model: labels.model,
          result: local.local ? "local" : "remote",
          reason: local.reason,
        });
      }
      if (record.instanceId) countTokens(metrics, record, record.instanceId, plan, labels);
    },
  };
}

/** The request itself: outcome, retries, timings, completion tokens, an admission refusal. */
function countRequest(metrics: GatewayMetrics, record: RequestRecord, labels: Labels): void {
  metrics.requests.inc({
    ...labels,
    endpoint: record.endpoint,
    outcome: record.outcome,
    status: String(record.status),
  });
  for (const attempt of record.attempts) {
    if (attempt.leg) {
      metrics.pdLegs.inc({
        model: labels.model,
        instance: attempt.instanceId,
        role: attempt.leg,
        result: attempt.failure ?? (attempt.status === undefined ? "cancelled" : "ok"),
      });
    }
    if (!attempt.failure) continue;
    metrics.retries.inc({
      model: labels.model,
      instance: attempt.instanceId,
      reason: attempt.failure,
    });
  }
  if (record.durationS !== undefined) metrics.e2e.observe(labels, record.durationS);
  if (record.ttftS !== undefined) metrics.ttft.observe(labels, record.ttftS);
  for (const gap of record.interTokenS) metrics.interToken.observe(labels, gap);
  if (record.usage.completionTokens !== undefined) {
    metrics.completionTokens.inc(labels, record.usage.completionTokens);
  }
  if (record.outcome === "rejected") {
    const verdict = record.plan?.admission;
    // A request that waited in the flow-control queue was refused by the queue, not admission.
    const reason = record.queue
      ? record.queue.code ?? "unknown"
      : verdict && !verdict.admit
      ? verdict.reason
      : "unknown";
    metrics.rejections.inc({ model: labels.model, arm: labels.arm, reason });
  }
}

/** The router's own work before dispatch: stage times, the store lookup, tokenizer failures. */
function observeStages(metrics: GatewayMetrics, plan: DispatchPlan, model: string): void {
  const stages = plan.timings;
  metrics.stageSeconds.observe({ model, stage: "tokenize" }, stages.tokenizeMs / 1000);
  metrics.stageSeconds.observe({ model, stage: "hash" }, stages.hashMs / 1000);
  metrics.stageSeconds.observe({ model, stage: "lookup" }, stages.lookupMs / 1000);
  metrics.stageSeconds.observe({ model, stage: "schedule" }, stages.scheduleMs / 1000);
  const outcome = plan.lookup?.outcome ?? "skipped";
  metrics.storeLookups.inc({ model, outcome });
  if (plan.lookup) {
    metrics.storeLookupSeconds.observe({ model, outcome }, plan.lookup.elapsedMs / 1000);
  }
  if (plan.tokenSource === "failed" || plan.tokenSource === "input_error") {
    metrics.tokenizerFailures.inc({ model });
  }
}

/** Prompt tokens sent to the instance, the predicted hits, and what the engine reported. */
function countTokens(
  metrics: GatewayMetrics,
  record: RequestRecord,
  instanceId: string,
  plan: DispatchPlan,
  labels: Labels,
): void {
  metrics.promptTokens.inc(labels, plan.promptTokens);
  const local = plan.candidates.find((c) => c.id === instanceId)?.localPrefixTokens ?? 0;
  metrics.predictedHitTokens.inc({ ...labels, scope: "local" }, local);
  metrics.predictedHitTokens.inc({ ...labels, scope: "pool" }, plan.poolPrefixTokens);
  const cached = record.usage.cachedTokens;
  if (cached === undefined || !reportsReuse(plan, record)) return;
  metrics.engineCachedTokens.inc(labels, cached);
  metrics.engineReportedPromptTokens.inc(labels, plan.promptTokens);
  // What the engine is predicted to reuse: with kv.poolLoads also what it loads from the store.
  // A disaggregated request's decode engine reports its prefill's hits (reportsReuse).
  const reused = predictedReuseTokens(plan, record.prefillInstanceId ?? instanceId);
  metrics.hitMismatchTokens.inc(labels, Math.abs(cached - reused));
}

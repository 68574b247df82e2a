/**
 * The access log: one `info` line per finished request, with what an operator searches by
 * (request id, model, arm, instances, outcome) and what they compare (TTFT, duration, predicted
 * hit). Built from the request record only: never the prompt, the bodies or any header, so no
 * API key or Authorization value can reach it.
 */
import type { RequestObserver, RequestRecord } from "../contracts.ts";
import { predictedReuseTokens } from "../scheduling/predicted_reuse.ts";
import type { LogFn } from "./json_log.ts";

export function accessLogObserver(log: LogFn): RequestObserver {
  return { onFinished: (record) => log("request", accessLogFields(record)) };
}

/** The fields of one request's line (exported for tests and other sinks). */
export function accessLogFields(record: RequestRecord): Record<string, unknown> {
  const plan = record.plan;
  const hitOn = record.prefillInstanceId ?? record.instanceId;
  return {
    level: "info",
    requestId: record.requestId,
    model: record.model,
    endpoint: record.endpoint,
    stream: record.stream,
    arm: record.arm,
    ...instanceFields(record),
    promptTokens: plan?.promptTokens,
    // The figure the engine's cached_tokens is compared with (x-tidegate-hit-tokens).
    predictedHitTokens: plan && hitOn ? predictedReuseTokens(plan, hitOn) : undefined,
    engineCachedTokens: record.usage.cachedTokens,
    status: record.status,
    outcome: record.outcome,
    ttftMs: toMs(record.ttftS),
    durationMs: toMs(record.durationS),
    attempts: record.attempts.length,
    failedAttempts: failedAttempts(record),
  };
}

/** A disaggregated request names both sides; a whole one the instance that answered. */
function instanceFields(record: RequestRecord): Record<string, string | undefined> {
  if (record.prefillInstanceId) {
    return { prefillInstance: record.prefillInstanceId, decodeInstance: record.instanceId };
  }
  return { instance: record.instanceId };
}

/** Which instances failed and how (failure kinds only: an engine's error text may quote input). */
function failedAttempts(record: RequestRecord): string[] | undefined {
  const failed = record.attempts.filter((a) => a.failure);
  return failed.length ? failed.map((a) => `${a.instanceId}:${a.failure}`) : undefined;
}

function toMs(seconds: number | undefined): number | undefined {
  return seconds === undefined ? undefined : Math.round(seconds * 10_000) / 10;
}

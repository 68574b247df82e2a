import type { BreakerPermit, FailureKind } from "../cluster/circuit_breaker.ts";
import type { LoadLease } from "../cluster/load_account.ts";
import { HttpError, openAIErrorBody } from "../openai/errors.ts";
import { type AttemptFailure, type ForwardTarget, forwardWithRetries } from "../proxy/forward.ts";
import { endToEndHeaders } from "../proxy/hop_headers.ts";
import { observeBody } from "../proxy/observed_body.ts";
import { UsageSniffer } from "../proxy/usage_sniffer.ts";
import { type DispatchPlan, reserve, scoreOf } from "./dispatch_plan.ts";
import type { ModelRuntime } from "./model_runtime.ts";
import type { RequestRecord } from "./request_record.ts";
import type { AttemptTrace, RequestTrace } from "../telemetry/tracing.ts";

export interface ExecuteOptions {
  runtime: ModelRuntime;
  plan: DispatchPlan;
  record: RequestRecord;
  /** The engine path, e.g. `/v1/chat/completions`. */
  path: string;
  clientHeaders: Headers;
  body: Uint8Array<ArrayBuffer>;
  /** Aborts when the client leaves before response headers (Deno's request.signal). */
  clientSignal?: AbortSignal;
  fetch: typeof fetch;
  now: () => number;
  maxRetries: number;
  headersTimeoutMs: number;
  /** Response headers added to every answer (x-request-id, x-tidegate-arm). */
  responseHeaders: Headers;
  /** Called exactly once when the request is over (last byte sent, failed, or aborted). */
  finish: (record: RequestRecord) => void;
  /** Spans for each upstream attempt (the fetch runs inside its span). */
  trace?: RequestTrace;
}

const BREAKER_KIND: Record<AttemptFailure, FailureKind> = {
  connect_error: "connect",
  timeout: "timeout",
  http_5xx: "http_5xx",
};

/**
 * Sends a planned request down the policy's ranking: a load lease and a breaker permit per
 * attempt, retries before the first byte, then streams the answer through while measuring TTFT,
 * inter-token gaps and usage. Every lease is released exactly once, however the request ends.
 */
export async function executeDispatch(options: ExecuteOptions): Promise<Response> {
  const { runtime, plan, record, now } = options;
  const cluster = runtime.cluster;
  const targets: ForwardTarget[] = plan.decision.ranking.flatMap((id) => {
    const entry = plan.entries.get(id);
    return entry ? [{ id, url: entry.config.url }] : [];
  });
  // A reservation no attempt used is given back.
  const dropReservation = () => {
    plan.reservation?.lease.release();
    plan.reservation = undefined;
  };
  // An instance that will not write this prompt's KV: followers must not be sent after it.
  const forgetPredictions = (id: string) => {
    if (plan.keys.length > 0) runtime.predicted?.forget(plan.keys, id);
  };
  if (targets.length === 0) {
    dropReservation();
    record.outcome = "no_instance";
    return fail(
      options,
      new HttpError(503, `No healthy instance of model '${record.model}' is available`, {
        code: "no_healthy_instance",
      }),
    );
  }

  const upstreamHeaders = endToEndHeaders(options.clientHeaders);
  upstreamHeaders.set("x-request-id", record.requestId);

  interface Held {
    permit: BreakerPermit;
    lease: LoadLease;
    end: () => void;
  }
  const held = new Map<string, Held>();
  const releaseHeld = (id: string) => {
    const h = held.get(id);
    if (!h) return;
    held.delete(id);
    h.lease.release();
    h.end();
  };

  let attemptTrace: AttemptTrace | undefined;
  let attemptNumber = 0;
  const tracedFetch: typeof fetch = (input, init) =>
    attemptTrace ? attemptTrace.run(() => options.fetch(input, init)) : options.fetch(input, init);

  const outcome = await forwardWithRetries(
    {
      method: "POST",
      path: options.path,
      headers: upstreamHeaders,
      body: options.body,
      targets,
      maxAttempts: 1 + options.maxRetries,
      headersTimeoutMs: options.headersTimeoutMs,
      signal: options.clientSignal,
    },
    { fetch: tracedFetch, now },
    {
      beforeAttempt(target) {
        const entry = cluster.get(target.id);
        const permit = entry?.breaker.tryAcquire();
        if (!entry || !permit) {
          // Its breaker opened since the decision: the reserved work and KV go elsewhere.
          if (plan.reservation?.instanceId === target.id) {
            dropReservation();
            forgetPredictions(target.id);
          }
          return false;
        }
        attemptTrace = options.trace?.attempt(target, ++attemptNumber, upstreamHeaders);
        const reserved = plan.reservation?.instanceId === target.id
          ? plan.reservation.lease
          : undefined;
        if (reserved) plan.reservation = undefined;
        held.set(target.id, {
          permit,
          lease: reserved ?? reserve(runtime, plan, target.id, now()),
          end: cluster.begin(target.id),
        });
        return true;
      },
      afterAttempt(target, attempt) {
        attemptTrace?.end(attempt, attempt.failure !== undefined);
        attemptTrace = undefined;
        const h = held.get(target.id);
        if (!h) return;
        if (attempt.failure) {
          h.permit.failure(BREAKER_KIND[attempt.failure]);
          releaseHeld(target.id);
          forgetPredictions(target.id);
        } else if (attempt.status === undefined) {
          h.permit.release(); // the client left: no verdict on the instance
          releaseHeld(target.id);
        } else {
          h.permit.success();
        }
      },
    },
  );
  record.attempts = outcome.attempts;
  dropReservation();

  if (outcome.kind === "client_gone") {
    for (const id of [...held.keys()]) releaseHeld(id);
    record.outcome = "client_aborted";
    record.status = 499;
    finishOnce(options);
    return new Response(null, { status: 499 });
  }
  if (outcome.kind === "failed") {
    record.outcome = outcome.status === 504 ? "upstream_timeout" : "upstream_failed";
    return fail(
      options,
      new HttpError(outcome.status, outcome.message, {
        code: outcome.status === 504 ? "upstream_timeout" : "upstream_unavailable",
      }),
    );
  }

  const { target, response } = outcome;
  const chosen = held.get(target.id)!;
  record.instanceId = target.id;
  record.status = response.status;
  record.outcome = response.status < 400 ? "ok" : "upstream_error_status";

  const sniffer = new UsageSniffer(response.headers.get("content-type"));
  let lastEventAt: number | undefined;
  const body = observeBody(response.body, {
    onFirstByte() {
      const at = now();
      record.ttftS = (at - record.startedAt) / 1000;
      chosen.lease.firstToken();
      cluster.recordTtft(target.id, record.ttftS);
      if (sniffer.isStream && response.ok) observePrefill(runtime, plan, target.id, record.ttftS);
    },
    onChunk(chunk) {
      if (sniffer.push(chunk) > 0) {
        const at = now();
        if (lastEventAt !== undefined) record.interTokenS.push((at - lastEventAt) / 1000);
        lastEventAt = at;
      }
    },
    onEnd(end, error) {
      record.usage = sniffer.finish();
      if (end === "client_aborted") record.outcome = "client_aborted";
      if (end === "upstream_failed") {
        record.outcome = "midstream_failure";
        record.error = (error as Error)?.message ?? String(error);
        cluster.get(target.id)?.breaker.recordFailure("request", "other");
      }
      releaseHeld(target.id);
      finishOnce(options);
    },
    errorEvent: sniffer.isStream
      ? (error) =>
        new TextEncoder().encode(
          `data: ${
            JSON.stringify(
              openAIErrorBody(
                502,
                `Upstream ${target.id} failed mid-stream: ${(error as Error)?.message ?? error}`,
                {
                  code: "upstream_stream_failed",
                },
              ),
            )
          }\n\n`,
        )
      : undefined,
  });

  const headers = endToEndHeaders(response.headers);
  headers.delete("content-length"); // the body is re-streamed (and may gain an error event)
  options.responseHeaders.forEach((value, key) => headers.set(key, value));
  headers.set("x-tidegate-instance", target.id);
  headers.set("x-tidegate-prompt-tokens", String(plan.promptTokens));
  headers.set(
    "x-tidegate-hit-tokens",
    String(plan.candidates.find((c) => c.id === target.id)?.localPrefixTokens ?? 0),
  );
  return new Response(body, { status: response.status, statusText: response.statusText, headers });
}

/** Feeds the instance's online prefill model with the prefill part of a measured TTFT. */
function observePrefill(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  instanceId: string,
  ttftS: number,
): void {
  const score = scoreOf(plan, instanceId);
  const candidate = plan.candidates.find((c) => c.id === instanceId);
  if (!candidate || plan.tokenSource === "failed") return;
  const queueS = score?.terms.queueS ?? 0;
  const transferS = score?.terms.transferS ?? 0;
  const cached = candidate.localPrefixTokens + (score?.transferTokens ?? 0);
  runtime.estimator(instanceId, plan.policy.ttftParams).observe({
    newTokens: Math.max(0, plan.promptTokens - cached),
    cachedTokens: cached,
    seconds: Math.max(0, ttftS - queueS - transferS),
  });
}

function fail(options: ExecuteOptions, error: HttpError): Response {
  options.record.status = error.status;
  options.record.error = error.message;
  finishOnce(options);
  return error.toResponse(options.responseHeaders);
}

function finishOnce(options: ExecuteOptions): void {
  const record = options.record;
  if (record.durationS !== undefined) return;
  record.durationS = (options.now() - record.startedAt) / 1000;
  options.finish(record);
}

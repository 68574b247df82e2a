import type { DispatchPlan, RequestRecord, RequestTrace } from "../contracts.ts";
import { HttpError } from "../openai/errors.ts";
import { type ForwardOutcome, type ForwardTarget, forwardWithRetries } from "../proxy/forward.ts";
import type { BodyLimits } from "../proxy/observed_body.ts";
import { AttemptLeases } from "./attempt_leases.ts";
import { executePd } from "./execute_pd.ts";
import type { ModelRuntime } from "./model_runtime.ts";
import { relayResponse } from "./relay_response.ts";
import type { Reservation } from "./reservation.ts";
import type { LogFn } from "../telemetry/json_log.ts";

export interface ExecuteOptions {
  runtime: ModelRuntime;
  plan: DispatchPlan;
  /** The plan's reservation; executeDispatch owns it from here (hands it on or cancels it). */
  reservation?: Reservation;
  /** A disaggregated plan's decode slot, owned likewise. */
  decodeReservation?: Reservation;
  /** The client's decoded body (a disaggregated request's legs are built from it). */
  requestBody?: Record<string, unknown>;
  record: RequestRecord;
  /** The engine path, e.g. `/v1/chat/completions`. */
  path: string;
  /** The headers that go to the engine (proxy/hop_headers.ts `upstreamHeaders`), this request's own. */
  upstreamHeaders: Headers;
  body: Uint8Array<ArrayBuffer>;
  /** The router asked the engine for stream usage: keep its usage chunk from the client. */
  stripStreamUsage?: boolean;
  /** Aborts when the client leaves before response headers (Deno's request.signal). */
  clientSignal?: AbortSignal;
  /**
   * Aborts when the router cuts what is in flight at shutdown (also part of `clientSignal`):
   * the client then gets a 503, not the silence a departed client gets.
   */
  shutdownSignal?: AbortSignal;
  fetch: typeof fetch;
  now: () => number;
  maxRetries: number;
  headersTimeoutMs: number;
  /** Silence and total-time bounds of an engine's answer once its headers came. */
  bodyLimits?: BodyLimits;
  /** Response headers added to every answer (x-request-id, x-tidegate-arm). */
  responseHeaders: Headers;
  /** Called exactly once when the request is over (last byte sent, failed, or aborted). */
  finish: (record: RequestRecord) => void;
  /** Spans for each upstream attempt (the fetch runs inside its span). */
  trace?: RequestTrace;
  /** Where failures after the answer began are reported. */
  log?: LogFn;
}

/**
 * Sends a planned request down the policy's ranking: a load lease and a breaker permit per
 * attempt, retries before the first byte, then streams the answer through while measuring TTFT,
 * inter-token gaps and usage. Every lease is released exactly once, however the request ends.
 */
export async function executeDispatch(options: ExecuteOptions): Promise<Response> {
  const { runtime, plan, record, reservation } = options;
  if (plan.decode) {
    return executePd({
      ...options,
      requestBody: options.requestBody ?? {},
      fail: (error) => fail(options, error),
      clientGone: () => clientGone(options),
      finishOnce: () => finishOnce(options),
    });
  }
  options.decodeReservation?.cancel();
  const targets = targetsOf(plan);
  if (targets.length === 0) {
    reservation?.cancel();
    record.outcome = "no_instance";
    return fail(
      options,
      new HttpError(503, `No healthy instance of model '${record.model}' is available`, {
        code: "no_healthy_instance",
      }),
    );
  }
  const { upstreamHeaders } = options;
  upstreamHeaders.set("x-request-id", record.requestId);
  const leases = new AttemptLeases(
    runtime,
    plan,
    reservation,
    upstreamHeaders,
    options.now,
    options.trace,
  );
  const outcome = await forward(options, targets, upstreamHeaders, leases);
  record.attempts = outcome.attempts;
  reservation?.cancel(); // never attempted: nothing will run there

  if (outcome.kind === "client_gone") {
    leases.releaseAll();
    return clientGone(options);
  }
  if (outcome.kind === "failed") {
    const timedOut = outcome.status === 504;
    record.outcome = timedOut ? "upstream_timeout" : "upstream_failed";
    return fail(
      options,
      new HttpError(outcome.status, outcome.message, {
        code: timedOut ? "upstream_timeout" : "upstream_unavailable",
      }),
    );
  }
  return relayResponse({
    ...options,
    target: outcome.target,
    response: outcome.response,
    leases,
    finishOnce: () => finishOnce(options),
  });
}

function forward(
  options: ExecuteOptions,
  targets: ForwardTarget[],
  headers: Headers,
  leases: AttemptLeases,
): Promise<ForwardOutcome> {
  return forwardWithRetries(
    {
      method: "POST",
      path: options.path,
      headers,
      body: options.body,
      targets,
      maxAttempts: 1 + options.maxRetries,
      headersTimeoutMs: options.headersTimeoutMs,
      signal: options.clientSignal,
    },
    { fetch: leases.tracedFetch(options.fetch), now: options.now },
    leases.hooks(),
  );
}

/** The policy's ranking as forward targets (instances removed since the decision are skipped). */
function targetsOf(plan: DispatchPlan): ForwardTarget[] {
  return plan.decision.ranking.flatMap((id) => {
    const entry = plan.entries.get(id);
    return entry ? [{ id, url: entry.config.url }] : [];
  });
}

function clientGone(options: ExecuteOptions): Response {
  if (options.shutdownSignal?.aborted) {
    options.record.outcome = "upstream_failed";
    return fail(
      options,
      new HttpError(503, "The router is shutting down; retry the request.", {
        code: "router_shutting_down",
      }),
    );
  }
  options.record.outcome = "client_aborted";
  options.record.status = 499;
  finishOnce(options);
  return new Response(null, { status: 499 });
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

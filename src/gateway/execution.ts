/**
 * What executing one planned request takes (ExecuteOptions), and how it ends when no engine
 * answer is relayed: failed (an OpenAI error), the client gone (499, or 503 at shutdown), or
 * finished once. Both executors use it: execute_dispatch.ts (whole requests) and execute_pd.ts
 * (a prefill and a decode leg).
 */
import type { ErrorAnswer } from "../openai/error_answer.ts";
import type { DispatchPlan, RequestRecord, RequestTrace } from "../contracts.ts";
import { HttpError } from "../openai/errors.ts";
import type { BodyLimits } from "../proxy/read_watchdog.ts";
import type { StreamedBody } from "../proxy/forward.ts";
import type { ModelRuntime } from "../runtime/model_runtime.ts";
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
  /** The router's own errors in the client's shape (default: OpenAI's). */
  errorAnswer?: ErrorAnswer;
  /** A load-routed request: an engine's 404 means it lacks the route; the next one is tried. */
  notFoundMeansNotServed?: boolean;
  /** The headers that go to the engine (proxy/hop_headers.ts `upstreamHeaders`), this request's own. */
  upstreamHeaders: Headers;
  body: Uint8Array<ArrayBuffer> | StreamedBody;
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

export function clientGone(options: ExecuteOptions): Response {
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

export function fail(options: ExecuteOptions, error: HttpError): Response {
  options.record.status = error.status;
  options.record.error = error.message;
  finishOnce(options);
  return (options.errorAnswer ?? ((e, h) => e.toResponse(h)))(error, options.responseHeaders);
}

export function finishOnce(options: ExecuteOptions): void {
  const record = options.record;
  if (record.durationS !== undefined) return;
  record.durationS = (options.now() - record.startedAt) / 1000;
  options.finish(record);
}

import type { DispatchPlan, RequestRecord } from "../contracts.ts";
import { openAIErrorBody } from "../openai/errors.ts";
import type { ForwardTarget } from "../proxy/forward.ts";
import { downstreamHeaders } from "../proxy/hop_headers.ts";
import { observeBody } from "../proxy/observed_body.ts";
import { type BodyLimits, UpstreamStalledError } from "../proxy/read_watchdog.ts";
import { UsageChunkFilter } from "../proxy/usage_chunk_filter.ts";
import { UsageSniffer } from "../proxy/usage_sniffer.ts";
import type { AttemptLeases } from "./attempt_leases.ts";
import type { ModelRuntime } from "../runtime/model_runtime.ts";
import { reusedTokens, scoreOf } from "./reservation.ts";
import { predictedReuseTokens } from "../scheduling/predicted_reuse.ts";
import { RouterShutdownError } from "./shutdown_state.ts";
import type { LogFn } from "../telemetry/json_log.ts";

export interface RelayOptions {
  runtime: ModelRuntime;
  plan: DispatchPlan;
  record: RequestRecord;
  target: ForwardTarget;
  response: Response;
  leases: AttemptLeases;
  now: () => number;
  /** Response headers added to every answer (x-request-id, x-tidegate-arm). */
  responseHeaders: Headers;
  /** Ends the request's record (once). */
  finishOnce: () => void;
  /**
   * A disaggregated request's prefill instance: named in the headers, its prefix counted as the
   * hit, and the decode instance's TTFT (prefill elsewhere + transfer) teaches no prefill model.
   */
  prefillInstanceId?: string;
  /** Called once when the body ended, before the record is finished. */
  onEnd?: (end: "completed" | "client_aborted" | "upstream_failed") => void;
  /** Silence and total-time bounds of the engine's answer (absent: none). */
  bodyLimits?: BodyLimits;
  /** The router asked for the stream's usage: the client does not get that chunk. */
  stripStreamUsage?: boolean;
  /** Where a mid-stream engine failure is reported (one line each). */
  log?: LogFn;
}

/**
 * Streams the chosen engine's answer to the client while measuring it: TTFT and inter-token gaps
 * of SSE streams, usage, and how the body ended. The attempt's lease is released when it ends.
 */
export function relayResponse(options: RelayOptions): Response {
  const { record, target, response } = options;
  record.instanceId = target.id;
  if (options.prefillInstanceId) record.prefillInstanceId = options.prefillInstanceId;
  record.status = response.status;
  record.outcome = response.status < 400 ? "ok" : "upstream_error_status";
  const sse = (response.headers.get("content-type") ?? "").includes("text/event-stream");
  const body = observeBody(
    response.body,
    bodyObserver(options),
    options.bodyLimits,
    options.stripStreamUsage && sse ? new UsageChunkFilter() : undefined,
  );
  const headers = downstreamHeaders(response.headers);
  headers.delete("content-length"); // the body is re-streamed (and may gain an error event)
  // Sent as it comes: the node:http adapter would otherwise read ahead to size a short body and
  // answer an engine failure met there with a bare text 500 instead of a broken answer.
  headers.set("transfer-encoding", "chunked");
  options.responseHeaders.forEach((value, key) => headers.set(key, value));
  headers.set("x-tidegate-instance", target.id);
  const prefillId = options.prefillInstanceId;
  if (prefillId) {
    headers.set("x-tidegate-prefill-instance", prefillId);
    headers.set("x-tidegate-decode-instance", target.id);
  }
  headers.set("x-tidegate-prompt-tokens", String(options.plan.promptTokens));
  const hitOn = prefillId ?? target.id;
  headers.set(
    "x-tidegate-hit-tokens",
    String(predictedReuseTokens(options.plan, hitOn)),
  );
  return new Response(body, { status: response.status, statusText: response.statusText, headers });
}

/** Inter-token gaps kept per request: an endless stream must not grow memory without bound. */
const MAX_GAP_SAMPLES = 100_000;

function bodyObserver(options: RelayOptions): Parameters<typeof observeBody>[1] {
  const { runtime, plan, record, target, response, leases, now } = options;
  const cluster = runtime.cluster;
  const sniffer = new UsageSniffer(response.headers.get("content-type"));
  let lastEventAt: number | undefined;
  return {
    onFirstByte() {
      leases.held(target.id)?.lease.firstToken();
      // A non-streamed answer's first byte comes after the whole generation: no TTFT.
      if (!sniffer.isStream) return;
      record.ttftS = (now() - record.startedAt) / 1000;
      cluster.recordTtft(target.id, record.ttftS);
      if (response.ok && !options.prefillInstanceId) {
        observePrefill(runtime, plan, target.id, record.ttftS);
      }
    },
    onChunk(chunk) {
      if (sniffer.push(chunk) === 0) return;
      const at = now();
      const room = record.interTokenS.length < MAX_GAP_SAMPLES;
      if (lastEventAt !== undefined && room) record.interTokenS.push((at - lastEventAt) / 1000);
      lastEventAt = at;
    },
    onEnd(end, error) {
      record.usage = sniffer.finish();
      record.responseId = sniffer.responseId;
      if (end === "client_aborted") record.outcome = "client_aborted";
      if (end === "upstream_failed") {
        record.outcome = "midstream_failure";
        record.error = (error as Error)?.message ?? String(error);
        const kind = error instanceof UpstreamStalledError ? "timeout" : "other";
        const detail = `${target.url}: ${record.error}`;
        const engineFault = !(error instanceof RouterShutdownError);
        if (engineFault) {
          cluster.get(target.id)?.breaker.recordFailure("request", kind, detail);
          logMidStreamFailure(options, record.error);
        }
      }
      leases.release(target.id);
      options.onEnd?.(end);
      options.finishOnce();
    },
    errorEvent: sniffer.isStream ? (error) => midStreamErrorEvent(target.id, error) : undefined,
  };
}

/** The operator's line for an engine that failed after its answer began: who, where, why. */
function logMidStreamFailure(options: RelayOptions, error: string): void {
  options.log?.("engine failed mid-stream", {
    level: "warn",
    requestId: options.record.requestId,
    model: options.record.model,
    instance: options.target.id,
    url: options.target.url,
    error,
  });
}

function midStreamErrorEvent(instanceId: string, error: unknown): Uint8Array {
  const body = error instanceof RouterShutdownError
    ? openAIErrorBody(503, "The router is shutting down before this answer ended; retry it.", {
      code: "router_shutting_down",
    })
    : openAIErrorBody(
      502,
      `Upstream ${instanceId} failed mid-stream: ${(error as Error)?.message ?? error}`,
      { code: "upstream_stream_failed" },
    );
  return new TextEncoder().encode(`data: ${JSON.stringify(body)}\n\n`);
}

/**
 * Feeds the instance's online prefill model with the prefill part of a measured TTFT. Only real
 * token counts train it: a chars/4 estimate (tokenizer off, failed or refused) would teach it noise.
 */
export function observePrefill(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  instanceId: string,
  ttftS: number,
): void {
  if (plan.tokenSource !== "tokenized" && plan.tokenSource !== "token_ids") return;
  const candidate = plan.candidates.find((c) => c.id === instanceId);
  if (!candidate) return;
  const score = scoreOf(plan, instanceId);
  const queueS = score?.terms.queueS ?? 0;
  const transferS = score?.terms.transferS ?? 0;
  const cached = reusedTokens(plan, instanceId);
  runtime.estimator(instanceId, plan.policy.ttftParams).observe({
    newTokens: Math.max(0, plan.promptTokens - cached),
    cachedTokens: cached,
    seconds: Math.max(0, ttftS - queueS - transferS),
  });
}

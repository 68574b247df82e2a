import {
  type Attributes,
  type Context,
  context as otelContext,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type TracerProvider,
} from "@opentelemetry/api";
import type { DispatchPlan } from "../gateway/dispatch_plan.ts";
import type { RequestRecord } from "../gateway/request_record.ts";
import type { AttemptRecord, ForwardTarget } from "../proxy/forward.ts";

export interface TracingOptions {
  /** Default: the global provider (Deno's own exporter when OTEL_DENO=true; a no-op otherwise). */
  tracerProvider?: TracerProvider;
  /**
   * Deno's built-in instrumentation is on (OTEL_DENO=true): it already made the server span and
   * injects `traceparent` into outgoing fetches, so the client's header must not be forwarded too
   * (Deno would append a second value).
   */
  denoInstrumented?: boolean;
  /** Monotonic ms (the router's clock) to epoch ms. */
  toEpochMs?: (monotonicMs: number) => number;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The remote parent carried by a W3C `traceparent` header, if it is well-formed. */
export function extractTraceparent(headers: Headers): Context {
  const header = headers.get("traceparent")?.trim().toLowerCase() ?? "";
  const match = TRACEPARENT.exec(header);
  if (!match || /^0+$/.test(match[1]) || /^0+$/.test(match[2])) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: match[1],
    spanId: match[2],
    traceFlags: parseInt(match[3], 16) & 1,
    isRemote: true,
  });
}

function traceparentOf(span: Span): string {
  const c = span.spanContext();
  return `00-${c.traceId}-${c.spanId}-0${c.traceFlags & 1}`;
}

/** One upstream attempt's span: the fetch runs inside it, so the engine continues this trace. */
export interface AttemptTrace {
  run<T>(fn: () => Promise<T>): Promise<T>;
  end(record: AttemptRecord, retried: boolean): void;
}

/** The span tree of one request (see README "Tracing"). */
export interface RequestTrace {
  /** Record the pre-dispatch stages (tokenize, hash, store lookup, schedule, admission). */
  planned(plan: DispatchPlan, record: RequestRecord): void;
  attempt(target: ForwardTarget, attemptNumber: number, headers: Headers): AttemptTrace;
  finish(record: RequestRecord): void;
}

/**
 * Spans through `@opentelemetry/api` only: in production Deno's exporter ships them (OTEL_DENO=true
 * and the standard OTEL_* variables); tests pass an in-memory provider. Stage spans are recorded
 * after the fact with their measured start and end times, so the hot path pays nothing for them.
 */
export class RequestTracing {
  readonly #provider?: TracerProvider;
  readonly #denoInstrumented: boolean;
  readonly #toEpochMs: (ms: number) => number;

  constructor(options: TracingOptions = {}) {
    this.#provider = options.tracerProvider;
    this.#denoInstrumented = options.denoInstrumented ?? false;
    this.#toEpochMs = options.toEpochMs ?? ((ms) => performance.timeOrigin + ms);
  }

  get #tracer() {
    return (this.#provider ?? trace.getTracerProvider()).getTracer("tidegate", "0.1.0");
  }

  begin(request: Request, route: string, startedAt: number): RequestTrace {
    const tracer = this.#tracer;
    const active = otelContext.active();
    const serverSpan = trace.getSpan(active);
    let root: Span;
    let owned: boolean;
    if (serverSpan && serverSpan.isRecording()) {
      // Deno made the server span: name it by route, as HTTP semantic conventions ask.
      serverSpan.updateName(route);
      serverSpan.setAttribute("http.route", route.split(" ")[1] ?? route);
      root = serverSpan;
      owned = false;
    } else {
      root = tracer.startSpan(route, {
        kind: SpanKind.SERVER,
        startTime: this.#toEpochMs(startedAt),
        attributes: {
          "http.request.method": request.method,
          "http.route": route.split(" ")[1] ?? route,
          "url.path": new URL(request.url).pathname,
        },
      }, extractTraceparent(request.headers));
      owned = true;
    }
    const parent = trace.setSpan(active, root);
    const toEpoch = this.#toEpochMs;
    const denoInstrumented = this.#denoInstrumented;
    const incomingTraceparent = request.headers.get("traceparent");

    const child = (
      name: string,
      start: number,
      end: number,
      attributes: Attributes,
      kind = SpanKind.INTERNAL,
    ) => {
      const span = tracer.startSpan(name, { kind, startTime: toEpoch(start), attributes }, parent);
      return { span, end: () => span.end(toEpoch(end)) };
    };

    return {
      planned(plan, record) {
        if (!root.isRecording()) return;
        const s = plan.stages;
        const t = child("tokenize", s.tokenizeStart, s.hashStart, {
          "tidegate.token_source": plan.tokenSource,
          "gen_ai.usage.input_tokens": plan.promptTokens,
          ...(plan.tokenizeError ? { "error.message": plan.tokenizeError } : {}),
        });
        if (plan.tokenSource === "failed") {
          t.span.setStatus({ code: SpanStatusCode.ERROR, message: plan.tokenizeError });
        }
        t.end();
        child("hash", s.hashStart, s.lookupStart, { "tidegate.chunks": plan.chunkKeys.length })
          .end();
        if (plan.lookup) {
          const lookup = plan.lookup;
          const l = child("store lookup", s.lookupStart, s.scheduleStart, {
            "tidegate.store.outcome": lookup.outcome,
            "tidegate.store.keys": lookup.keysQueried,
            "tidegate.store.batches": lookup.batches,
            "tidegate.store.attempts": lookup.attempts,
            "tidegate.store.deadline_hit": lookup.outcome === "deadline",
            "tidegate.store.hit_keys": [...lookup.locations.values()].filter((l) =>
              l.present
            ).length,
            "tidegate.store.pool_prefix_chunks": plan.hits.poolChunks,
            "tidegate.store.predicted_keys": lookup.predictedKeys ?? 0,
          });
          if (lookup.outcome === "failed") {
            l.span.setStatus({ code: SpanStatusCode.ERROR, message: lookup.error });
          }
          l.end();
        }
        const sched = child("schedule", s.scheduleStart, s.admissionStart, {
          "tidegate.policy": plan.policy.name,
          "tidegate.arm": record.arm,
          "tidegate.chosen": plan.decision.ranking[0] ?? "",
          "tidegate.ranking": plan.decision.ranking.join(","),
          "tidegate.pool_prefix_tokens": plan.poolPrefixTokens,
          ...(plan.predictedTtftS !== undefined
            ? { "tidegate.predicted_ttft_s": plan.predictedTtftS }
            : {}),
        });
        for (const score of plan.decision.scores) {
          const candidate = plan.candidates.find((c) => c.id === score.id);
          const attributes: Attributes = {
            "tidegate.instance": score.id,
            "tidegate.score": score.score,
            "tidegate.healthy": candidate?.healthy ?? false,
            "tidegate.local_prefix_tokens": candidate?.localPrefixTokens ?? 0,
          };
          for (const [term, value] of Object.entries(score.terms)) {
            attributes[`tidegate.term.${term}`] = value;
          }
          if (score.excluded) attributes["tidegate.excluded"] = score.excluded;
          sched.span.addEvent("candidate", attributes, toEpoch(s.admissionStart));
        }
        sched.end();
        const admission = plan.admission;
        const a = child("admission", s.admissionStart, s.end, {
          "tidegate.admitted": admission.admit,
          ...(admission.admit ? {} : {
            "tidegate.reject_reason": admission.reason,
            "tidegate.retry_after_s": admission.retryAfterS,
          }),
        });
        a.end();
      },

      attempt(target, attemptNumber, headers) {
        const span = tracer.startSpan(`upstream ${target.id}`, {
          kind: SpanKind.CLIENT,
          attributes: {
            "tidegate.instance": target.id,
            "tidegate.attempt": attemptNumber,
            "server.address": new URL(target.url).hostname,
            "server.port": Number(new URL(target.url).port || 80),
          },
        }, parent);
        const spanContext = trace.setSpan(parent, span);
        if (denoInstrumented) {
          // Deno's fetch span (a child of this one) injects the header itself.
          headers.delete("traceparent");
        } else if (span.isRecording()) {
          headers.set("traceparent", traceparentOf(span));
        } else if (incomingTraceparent) {
          headers.set("traceparent", incomingTraceparent);
        }
        return {
          run: (fn) => otelContext.with(spanContext, fn),
          end(attempt, retried) {
            if (attempt.status !== undefined) {
              span.setAttribute("http.response.status_code", attempt.status);
            }
            if (attempt.headersAt !== undefined) {
              span.setAttribute("tidegate.ttfb_s", (attempt.headersAt - attempt.startedAt) / 1000);
            }
            if (attempt.failure) {
              span.setAttribute("tidegate.retry_reason", attempt.failure);
              span.setAttribute("tidegate.retried", retried);
              span.setStatus({
                code: SpanStatusCode.ERROR,
                message: attempt.error ?? attempt.failure,
              });
            }
            span.end();
          },
        };
      },

      finish(record) {
        if (root.isRecording()) {
          const attributes: Attributes = {
            "gen_ai.operation.name": record.endpoint === "chat" ? "chat" : "text_completion",
            "gen_ai.request.model": record.model,
            "http.response.status_code": record.status,
            "tidegate.request_id": record.requestId,
            "tidegate.arm": record.arm,
            "tidegate.outcome": record.outcome,
            "tidegate.stream": record.stream,
          };
          if (record.instanceId) attributes["tidegate.instance"] = record.instanceId;
          if (record.plan) attributes["gen_ai.usage.input_tokens"] = record.plan.promptTokens;
          if (record.usage.completionTokens !== undefined) {
            attributes["gen_ai.usage.output_tokens"] = record.usage.completionTokens;
          }
          if (record.usage.cachedTokens !== undefined) {
            attributes["tidegate.engine_cached_tokens"] = record.usage.cachedTokens;
          }
          if (record.ttftS !== undefined) attributes["tidegate.ttft_s"] = record.ttftS;
          root.setAttributes(attributes);
          if (record.status >= 500 || record.outcome === "midstream_failure") {
            root.setStatus({ code: SpanStatusCode.ERROR, message: record.error });
          }
        }
        if (owned) {
          root.end(
            record.durationS !== undefined
              ? toEpoch(record.startedAt + record.durationS * 1000)
              : undefined,
          );
        }
      },
    };
  }
}

import {
  type Attributes,
  type Context,
  context as otelContext,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
  type TracerProvider,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import type {
  AttemptTrace,
  DispatchPlan,
  QueueRecord,
  RequestRecord,
  RequestTrace,
  RequestTracer,
} from "../contracts.ts";
import type { ForwardTarget } from "../proxy/forward.ts";
import type { Endpoint } from "../openai/endpoints.ts";

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

const W3C = new W3CTraceContextPropagator();
const HEADERS_GETTER = {
  get: (headers: Headers, key: string) => headers.get(key) ?? undefined,
  keys: (headers: Headers) => [...headers.keys()],
};

/**
 * The client's trace context from W3C `traceparent`/`tracestate`, whatever the header names'
 * spelling (`Headers` is case-insensitive); ROOT_CONTEXT when absent or malformed.
 */
export function extractTraceparent(headers: Headers): Context {
  return W3C.extract(ROOT_CONTEXT, headers, HEADERS_GETTER);
}

function traceparentOf(span: Span): string {
  const c = span.spanContext();
  return `00-${c.traceId}-${c.spanId}-0${c.traceFlags & 1}`;
}

/**
 * Spans through `@opentelemetry/api` only: in production Deno's exporter ships them (OTEL_DENO=true
 * and the standard OTEL_* variables); tests pass an in-memory provider. Stage spans are recorded
 * after the fact with their measured start and end times, so the hot path pays nothing for them.
 */
export class RequestTracing implements RequestTracer {
  readonly #provider?: TracerProvider;
  readonly #denoInstrumented: boolean;
  readonly #toEpochMs: (ms: number) => number;

  constructor(options: TracingOptions = {}) {
    this.#provider = options.tracerProvider;
    this.#denoInstrumented = options.denoInstrumented ?? false;
    this.#toEpochMs = options.toEpochMs ?? ((ms) => performance.timeOrigin + ms);
  }

  begin(request: Request, route: string, startedAt: number): RequestTrace {
    const tracer = (this.#provider ?? trace.getTracerProvider()).getTracer("tidegate", "0.1.0");
    const active = otelContext.active();
    const client = extractTraceparent(request.headers);
    const serverSpan = trace.getSpan(active);
    const clientTraceId = trace.getSpanContext(client)?.traceId;
    // Deno's server span is ours to name only when it continues the client's trace (its own
    // extraction misses some spellings of the header); else this request gets its own.
    if (
      serverSpan?.isRecording() &&
      (!clientTraceId || serverSpan.spanContext().traceId === clientTraceId)
    ) {
      serverSpan.updateName(route);
      serverSpan.setAttribute("http.route", routePath(route));
      return new RequestSpans(tracer, serverSpan, false, active, this.#options(request));
    }
    const root = tracer.startSpan(route, {
      kind: SpanKind.SERVER,
      startTime: this.#toEpochMs(startedAt),
      attributes: {
        "http.request.method": request.method,
        "http.route": routePath(route),
        "url.path": new URL(request.url).pathname,
      },
    }, client);
    return new RequestSpans(tracer, root, true, active, this.#options(request));
  }

  #options(request: Request): SpanTreeOptions {
    return {
      toEpoch: this.#toEpochMs,
      denoInstrumented: this.#denoInstrumented,
      incomingTraceparent: request.headers.get("traceparent"),
    };
  }
}

function routePath(route: string): string {
  return route.split(" ")[1] ?? route;
}

interface SpanTreeOptions {
  toEpoch: (monotonicMs: number) => number;
  denoInstrumented: boolean;
  incomingTraceparent: string | null;
}

/** The span tree of one request (docs/observability.md, "Traces"). */
class RequestSpans implements RequestTrace {
  readonly #parent: Context;

  constructor(
    readonly tracer: Tracer,
    readonly root: Span,
    readonly owned: boolean,
    active: Context,
    readonly options: SpanTreeOptions,
  ) {
    this.#parent = trace.setSpan(active, root);
  }

  #child(name: string, start: number, end: number, attributes: Attributes) {
    const toEpoch = this.options.toEpoch;
    const span = this.tracer.startSpan(
      name,
      { kind: SpanKind.INTERNAL, startTime: toEpoch(start), attributes },
      this.#parent,
    );
    return { span, end: () => span.end(toEpoch(end)) };
  }

  queued(queue: QueueRecord, startMs: number, endMs: number): void {
    if (!this.root.isRecording()) return;
    const q = this.#child("queue", startMs, endMs, {
      "tidegate.queue.priority": queue.priority,
      "tidegate.queue.result": queue.result,
      "tidegate.queue.cause": queue.cause,
      "tidegate.queue.waited_s": queue.waitedS,
    });
    if (queue.result !== "admitted") {
      q.span.setStatus({ code: SpanStatusCode.ERROR, message: `queue: ${queue.result}` });
    }
    q.end();
  }

  planned(plan: DispatchPlan, record: RequestRecord): void {
    if (!this.root.isRecording()) return;
    if (!record.queue) this.#tokenizeAndHashSpans(plan);
    this.#lookupSpan(plan);
    this.#scheduleSpan(plan, record);
    const admission = plan.admission;
    this.#child("admission", plan.stages.admissionStart, plan.stages.end, {
      "tidegate.admitted": admission.admit,
      ...(admission.admit ? {} : {
        "tidegate.reject_reason": admission.reason,
        "tidegate.retry_after_s": admission.retryAfterS,
      }),
    }).end();
  }

  #tokenizeAndHashSpans(plan: DispatchPlan): void {
    const s = plan.stages;
    const t = this.#child("tokenize", s.tokenizeStart, s.hashStart, {
      "tidegate.token_source": plan.tokenSource,
      "gen_ai.usage.input_tokens": plan.promptTokens,
      ...(plan.tokenizeError ? { "error.message": plan.tokenizeError } : {}),
    });
    if (plan.tokenSource === "failed") {
      t.span.setStatus({ code: SpanStatusCode.ERROR, message: plan.tokenizeError });
    }
    t.end();
    const h = this.#child("hash", s.hashStart, s.lookupStart, {
      "tidegate.chunks": plan.chunkKeys.length,
      ...(plan.keysError ? { "error.message": plan.keysError } : {}),
    });
    if (plan.keysError) h.span.setStatus({ code: SpanStatusCode.ERROR, message: plan.keysError });
    h.end();
  }

  #lookupSpan(plan: DispatchPlan): void {
    const lookup = plan.lookup;
    if (!lookup) return;
    const l = this.#child("store lookup", plan.stages.lookupStart, plan.stages.scheduleStart, {
      "tidegate.store.outcome": lookup.outcome,
      "tidegate.store.keys": lookup.keysQueried,
      "tidegate.store.batches": lookup.batches,
      "tidegate.store.attempts": lookup.attempts,
      "tidegate.store.deadline_hit": lookup.outcome === "deadline",
      "tidegate.store.hit_keys": [...lookup.locations.values()].filter((l) => l.present).length,
      "tidegate.store.pool_prefix_chunks": plan.hits.poolChunks,
      "tidegate.store.predicted_keys": lookup.predictedKeys ?? 0,
    });
    if (lookup.outcome === "failed") {
      l.span.setStatus({ code: SpanStatusCode.ERROR, message: lookup.error });
    }
    l.end();
  }

  /** The schedule span, with one event per candidate carrying its score terms. */
  #scheduleSpan(plan: DispatchPlan, record: RequestRecord): void {
    const s = plan.stages;
    const sched = this.#child("schedule", s.scheduleStart, s.admissionStart, {
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
      sched.span.addEvent("candidate", attributes, this.options.toEpoch(s.admissionStart));
    }
    this.#decodeEvents(plan, sched.span);
    sched.end();
  }

  /** A disaggregated plan's decode side: the choice, and one event per decode candidate. */
  #decodeEvents(plan: DispatchPlan, span: Span): void {
    const decode = plan.decode;
    if (!decode) return;
    span.setAttribute("tidegate.pd.protocol", decode.protocol);
    span.setAttribute("tidegate.pd.decode", decode.decision.ranking[0] ?? "");
    if (decode.localPrefill) {
      span.setAttribute("tidegate.pd.local_prefill", decode.localPrefill.local);
      span.setAttribute("tidegate.pd.local_prefill_reason", decode.localPrefill.reason);
    }
    if (decode.judgedBatch !== undefined) {
      span.setAttribute("tidegate.pd.judged_batch", decode.judgedBatch);
    }
    if (decode.judgedLoad) span.setAttribute("tidegate.pd.judged_load", decode.judgedLoad);
    if (decode.judgedMode) span.setAttribute("tidegate.pd.judged_mode", decode.judgedMode);
    for (const score of decode.decision.scores) {
      const attributes: Attributes = {
        "tidegate.instance": score.id,
        "tidegate.score": score.score,
      };
      for (const [term, value] of Object.entries(score.terms)) {
        attributes[`tidegate.term.${term}`] = value;
      }
      if (score.excluded) attributes["tidegate.excluded"] = score.excluded;
      span.addEvent(
        "decode candidate",
        attributes,
        this.options.toEpoch(plan.stages.admissionStart),
      );
    }
  }

  attempt(
    target: ForwardTarget,
    attemptNumber: number,
    headers: Headers,
    leg?: "prefill" | "decode",
  ): AttemptTrace {
    const url = new URL(target.url);
    const span = this.tracer.startSpan(`${leg ?? "upstream"} ${target.id}`, {
      kind: SpanKind.CLIENT,
      attributes: {
        "tidegate.instance": target.id,
        "tidegate.attempt": attemptNumber,
        ...(leg ? { "tidegate.leg": leg } : {}),
        "server.address": url.hostname,
        "server.port": Number(url.port || (url.protocol === "https:" ? 443 : 80)),
      },
    }, this.#parent);
    const spanContext = trace.setSpan(this.#parent, span);
    if (this.options.denoInstrumented) {
      // Deno's fetch span (a child of this one) injects the header itself.
      headers.delete("traceparent");
    } else if (span.isRecording()) {
      headers.set("traceparent", traceparentOf(span));
    } else if (this.options.incomingTraceparent) {
      headers.set("traceparent", this.options.incomingTraceparent);
    }
    return {
      run: (fn) => otelContext.with(spanContext, fn),
      end: (attempt, retried) => endAttemptSpan(span, attempt, retried),
    };
  }

  finish(record: RequestRecord): void {
    if (this.root.isRecording()) {
      this.root.setAttributes(finishedAttributes(record));
      if (record.status >= 500 || record.outcome === "midstream_failure") {
        this.root.setStatus({ code: SpanStatusCode.ERROR, message: record.error });
      }
    }
    if (!this.owned) return;
    this.root.end(
      record.durationS !== undefined
        ? this.options.toEpoch(record.startedAt + record.durationS * 1000)
        : undefined,
    );
  }
}

function endAttemptSpan(
  span: Span,
  attempt: Parameters<AttemptTrace["end"]>[0],
  retried: boolean,
): void {
  if (attempt.status !== undefined) {
    span.setAttribute("http.response.status_code", attempt.status);
  }
  if (attempt.headersAt !== undefined) {
    span.setAttribute("tidegate.ttfb_s", (attempt.headersAt - attempt.startedAt) / 1000);
  }
  if (attempt.failure) {
    span.setAttribute("tidegate.retry_reason", attempt.failure);
    span.setAttribute("tidegate.retried", retried);
    span.setStatus({ code: SpanStatusCode.ERROR, message: attempt.error ?? attempt.failure });
  }
  span.end();
}

function finishedAttributes(record: RequestRecord): Attributes {
  const attributes: Attributes = {
    "gen_ai.operation.name": OPERATION_NAMES[record.endpoint] ?? record.endpoint,
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
  return attributes;
}

/**
 * `fetch` that runs outside any trace: background probes and polls start root spans (under
 * OTEL_DENO Deno's fetch span would otherwise join whatever request or timer context started
 * the background task, and every probe would hang under one never-ending trace).
 */
export function untracedFetch(fetch: typeof globalThis.fetch): typeof globalThis.fetch {
  return (input, init) => otelContext.with(ROOT_CONTEXT, () => fetch(input, init));
}

/** OpenTelemetry's GenAI operation names where one fits; other routes go by their own name. */
const OPERATION_NAMES: Partial<Record<Endpoint, string>> = {
  chat: "chat",
  messages: "chat",
  responses: "chat",
  completions: "text_completion",
  embeddings: "embeddings",
};

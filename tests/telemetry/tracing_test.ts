import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import {
  type Context,
  context,
  type ContextManager,
  ROOT_CONTEXT,
  SpanKind,
} from "@opentelemetry/api";
import type { RequestRecord } from "../../src/contracts.ts";
import { assert, assertEquals } from "../assert.ts";
import { completion, range, startTestCluster } from "../support/harness.ts";
import { extractTraceparent, RequestTracing } from "../../src/telemetry/tracing.ts";
import { trace } from "@opentelemetry/api";

function memoryTracing() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { exporter, provider };
}

const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

Deno.test("one request makes one span tree: server span, pre-dispatch stages and the upstream attempt", async () => {
  const { exporter, provider } = memoryTracing();
  const t = await startTestCluster({ tracerProvider: provider });
  try {
    const prompt = range(100, 64);
    t.hold(1, prompt, 4);
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const response = await completion(t.url, { prompt }, { traceparent });
    assertEquals(response.status, 200);
    await response.text();
    const spans = exporter.getFinishedSpans();
    const root = spans.find((s) => s.name === "POST /v1/completions")!;
    assert(root, `spans: ${spans.map((s) => s.name).join(", ")}`);
    assertEquals(root.kind, SpanKind.SERVER);
    assertEquals(root.spanContext().traceId, "0af7651916cd43dd8448eb211c80319c");
    assertEquals(parentOf(root), "b7ad6b7169203331");
    assertEquals(root.attributes["gen_ai.request.model"], "test-model");
    assertEquals(root.attributes["gen_ai.usage.input_tokens"], 64);
    assertEquals(root.attributes["http.response.status_code"], 200);
    assertEquals(root.attributes["tidegate.instance"], "e1");

    const children = spans.filter((s) => parentOf(s) === root.spanContext().spanId);
    assertEquals(
      children.map((s) => s.name).sort(),
      ["admission", "hash", "schedule", "store lookup", "tokenize", "upstream e1"],
    );
    const lookup = children.find((s) => s.name === "store lookup")!;
    assertEquals(lookup.attributes["tidegate.store.keys"], 4);
    assertEquals(lookup.attributes["tidegate.store.hit_keys"], 4);
    assertEquals(lookup.attributes["tidegate.store.deadline_hit"], false);
    assertEquals(lookup.attributes["tidegate.store.pool_prefix_chunks"], 4);
    const schedule = children.find((s) => s.name === "schedule")!;
    assertEquals(schedule.attributes["tidegate.policy"], "cache_aware");
    assertEquals(schedule.attributes["tidegate.chosen"], "e1");
    assertEquals(schedule.events.filter((e) => e.name === "candidate").length, 3);
    const e1 = schedule.events.find((e) => e.attributes?.["tidegate.instance"] === "e1")!;
    assertEquals(e1.attributes?.["tidegate.local_prefix_tokens"], 64);
    // Every candidate's terms add up to its score.
    for (const event of schedule.events) {
      const terms = Object.entries(event.attributes ?? {}).filter(([k]) =>
        k.startsWith("tidegate.term.")
      );
      assert(terms.length > 0);
      const sum = terms.reduce((total, [, value]) => total + Number(value), 0);
      assertEquals(sum, event.attributes?.["tidegate.score"]);
    }
    const upstream = children.find((s) => s.name === "upstream e1")!;
    assertEquals(upstream.kind, SpanKind.CLIENT);
    assertEquals(upstream.attributes["http.response.status_code"], 200);
    // The engine continues the same trace, under the attempt span.
    const seen = t.engines[1].stats.requests.at(-1)!;
    assertEquals(
      seen.traceparent,
      `00-${root.spanContext().traceId}-${upstream.spanContext().spanId}-01`,
    );
    // Stages are in order and inside the server span.
    const start = (s: ReadableSpan) => s.startTime[0] * 1e9 + s.startTime[1];
    const order = ["tokenize", "hash", "store lookup", "schedule", "admission", "upstream e1"]
      .map((name) => start(children.find((s) => s.name === name)!));
    for (let i = 1; i < order.length; i++) {
      assert(order[i - 1] <= order[i], `stage ${i} starts early`);
    }
    assert(start(root) <= order[0]);
  } finally {
    await t.close();
  }
});

Deno.test("a retried attempt gets its own span with the retry reason", async () => {
  const { exporter, provider } = memoryTracing();
  const t = await startTestCluster({ tracerProvider: provider });
  try {
    const prompt = range(300, 64);
    t.hold(0, prompt, 4);
    await t.engines[0].setFailure("http500");
    const response = await completion(t.url, { prompt });
    assertEquals(response.status, 200);
    await response.text();
    const attempts = exporter.getFinishedSpans().filter((s) => s.name.startsWith("upstream "));
    assertEquals(attempts.length, 2);
    const failed = attempts.find((s) => s.name === "upstream e0")!;
    assertEquals(failed.attributes["tidegate.retry_reason"], "http_5xx");
    assertEquals(failed.attributes["tidegate.retried"], true);
    assertEquals(failed.attributes["tidegate.attempt"], 1);
    const ok = attempts.find((s) => s.name !== "upstream e0")!;
    assertEquals(ok.attributes["tidegate.attempt"], 2);
    assert(typeof ok.attributes["tidegate.ttfb_s"] === "number");
  } finally {
    await t.close();
  }
});

Deno.test("extractTraceparent() accepts W3C headers and ignores malformed or all-zero ones", () => {
  const ok = extractTraceparent(
    new Headers({ traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" }),
  );
  assertEquals(trace.getSpanContext(ok)?.traceId, "0af7651916cd43dd8448eb211c80319c");
  for (
    const bad of [
      "",
      "garbage",
      "00-00000000000000000000000000000000-b7ad6b7169203331-01",
      "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
    ]
  ) {
    assertEquals(
      trace.getSpanContext(extractTraceparent(new Headers({ traceparent: bad }))),
      undefined,
      bad,
    );
  }
});

Deno.test("an upstream span names the engine's port, 443 by default for an https URL and 80 for http", () => {
  const { exporter, provider } = memoryTracing();
  const tracing = new RequestTracing({ tracerProvider: provider });
  const request = new Request("http://router/v1/completions", { method: "POST" });
  const tree = tracing.begin(request, "POST /v1/completions", performance.now());
  for (const url of ["https://engine.example", "http://engine.example", "https://e:8443"]) {
    tree.attempt({ id: url, url }, 1, new Headers()).end(
      { instanceId: url, startedAt: 0, status: 200 },
      false,
    );
  }
  const ports = exporter.getFinishedSpans().map((s) => s.attributes["server.port"]);
  assertEquals(ports, [443, 80, 8443]);
});

Deno.test("a server span made by the runtime for another trace does not swallow the client's traceparent", () => {
  // Deno's own extraction misses some spellings of the header: its server span then starts a
  // new trace, and the router must put the request under the client's trace itself.
  const { exporter, provider } = memoryTracing();
  const runtimeSpan = provider.getTracer("runtime").startSpan("runtime server span");
  const active = trace.setSpan(ROOT_CONTEXT, runtimeSpan);
  const manager = new StackContextManager(active);
  context.setGlobalContextManager(manager);
  try {
    const tracing = new RequestTracing({ tracerProvider: provider });
    const clientTrace = "0af7651916cd43dd8448eb211c80319c";
    const request = new Request("http://router/v1/completions", {
      method: "POST",
      headers: { Traceparent: `00-${clientTrace}-b7ad6b7169203331-01` },
    });
    const tree = tracing.begin(request, "POST /v1/completions", performance.now());
    tree.finish({ status: 200, usage: {}, startedAt: 0 } as unknown as RequestRecord);
    const root = exporter.getFinishedSpans().find((s) => s.name === "POST /v1/completions");
    assert(root, "the router made its own server span");
    assertEquals(root.spanContext().traceId, clientTrace);
    assertEquals(parentOf(root), "b7ad6b7169203331");
  } finally {
    context.disable();
    runtimeSpan.end();
  }
});

/** A synchronous context manager whose active context starts as `base` (enough for begin()). */
class StackContextManager implements ContextManager {
  #stack: Context[];
  constructor(base: Context) {
    this.#stack = [base];
  }
  active(): Context {
    return this.#stack.at(-1)!;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    this.#stack.push(ctx);
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.#stack.pop();
    }
  }
  bind<T>(_context: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    return this;
  }
}

/**
 * Late binding through the router (`slo.queue.holdAboveTokens`, src/scheduling/late_binding.ts):
 * a request admission admits still waits while every instance has more prefill waiting than the
 * bound, first come first served, and is sent once one has room; without the bound it goes at once.
 */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import {
  completion,
  loadOnlyModel,
  MODEL,
  range,
  startRouter,
  startTestCluster,
} from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import type { TracerProvider } from "@opentelemetry/api";

interface ClusterOptions {
  /** `hang` (default): no request ever gets a byte. `stall`: a stream gets its first token only. */
  engine?: "hang" | "stall";
  ttlS?: number;
  recheckMs?: number;
  stream?: boolean;
  tracerProvider?: TracerProvider;
  /** The fake engine's time scale (default the harness's 0.001: a prefill in well under 1 ms). */
  timeScale?: number;
  /** The queue's `admitWhen` (default the router's). */
  admitWhen?: string;
}

/** One engine that never ends an answer (each request holds its lease until its client leaves). */
async function cluster(holdAboveTokens?: number, options: ClusterOptions = {}) {
  const { ttlS = 30, recheckMs, stream = false } = options;
  const t = await startTestCluster({
    engines: 1,
    tracerProvider: options.tracerProvider,
    engine: options.timeScale === undefined ? undefined : { timeScale: options.timeScale },
    kv: { store: "none" }, // only the router's own predictions: no lookup to wait on
    model: {
      prefillModel: { linear: 1, quadratic: 0, constant: 0 },
      slo: {
        ttftS: 60,
        admission: true,
        queue: { enabled: true, ttlS, holdAboveTokens, recheckMs, admitWhen: options.admitWhen },
      },
    },
  });
  await t.engines[0].setFailure(options.engine ?? "hang", { allEndpoints: false });
  const clients: AbortController[] = [];
  const send = (first: number, tokens = 1_000) => {
    const abort = new AbortController();
    clients.push(abort);
    const body = { prompt: range(first, tokens), max_tokens: 1, stream };
    completion(t.url, body, {}, abort.signal).catch(() => {}); // its body is read by nobody
    return abort;
  };
  const received = () =>
    t.engines[0].stats.requests.map((r) => (r.body as { prompt?: number[] })?.prompt?.[0]);
  const waiting = () =>
    [...(t.router.gateway.queueLengths().get(MODEL)?.values() ?? [])].reduce((a, b) => a + b, 0);
  const leave = async () => {
    for (const abort of clients) abort.abort();
    await eventually(() => t.router.gateway.inFlight === 0, 10_000, "every request ended");
  };
  const end = async () => {
    try {
      await leave();
    } finally {
      await t.close();
    }
  };
  return { t, send, received, waiting, leave, end };
}

Deno.test("late binding: admitted requests wait while the engine has prefill waiting, and go first come first served once it has room", async () => {
  const c = await cluster(0);
  try {
    const a = c.send(1_000_000);
    await eventually(() => c.received().includes(1_000_000), 10_000, "the first goes at once");
    const b = c.send(2_000_000);
    await eventually(() => c.waiting() === 1, 10_000, "the second is held");
    c.send(3_000_000);
    await eventually(() => c.waiting() === 2, 10_000, "the third is held behind it");
    assertEquals(c.received(), [1_000_000]);
    a.abort(); // its lease ends: the engine has room
    await eventually(() => c.received().includes(2_000_000), 10_000, "the second goes");
    assertEquals(c.waiting(), 1);
    assert(!c.received().includes(3_000_000), "the third still waits: the second prefills");
    b.abort();
    await eventually(() => c.received().includes(3_000_000), 10_000, "then the third");
    assertEquals(c.waiting(), 0);
  } finally {
    await c.end();
  }
});

for (const [admitWhen, goes] of [["cause", true], ["idle", false]] as const) {
  Deno.test(`late binding with admitWhen ${admitWhen}: a held request ${goes ? "goes once an instance has room, though prefill still waits there" : "waits until nothing prefills"}`, async () => {
    const c = await cluster(1_500, { admitWhen });
    try {
      const a = c.send(1_000_000);
      await eventually(() => c.received().includes(1_000_000), 10_000, "the first goes");
      c.send(2_000_000);
      await eventually(() => c.received().includes(2_000_000), 10_000, "1,000 waiting: room");
      c.send(3_000_000);
      await eventually(() => c.waiting() === 1, 10_000, "2,000 waiting: the third is held");
      const runtime = c.t.router.registry.runtime(MODEL)!;
      a.abort(); // 1,000 tokens still wait to prefill: room under the bound, not idle
      if (goes) {
        await eventually(() => c.received().includes(3_000_000), 10_000, "the third goes");
      } else {
        const plans = runtime.sequence;
        await eventually(() => runtime.sequence >= plans + 3, 10_000, "it was re-planned");
        assertEquals(c.waiting(), 1);
        assert(!c.received().includes(3_000_000));
      }
    } finally {
      await c.end();
    }
  });
}

/**
 * Three streamed requests on an engine that stalls after each first token (about 350 ms of prefill
 * each), no recheck within the test: only a prefill's end can release the two held ones.
 */
async function heldUntilFirstTokens(c: Awaited<ReturnType<typeof cluster>>): Promise<void> {
  c.send(1_000_000);
  await eventually(() => c.received().length === 1, 10_000, "the first goes");
  c.send(2_000_000);
  c.send(3_000_000);
  await eventually(() => c.waiting() === 2, 10_000, "the other two are held");
  // Each gets its first token and then stalls, holding its stream open: none ends.
  await eventually(() => c.received().length === 3, 10_000, "all three reach the engine");
  assertEquals(c.waiting(), 0);
  assertEquals(c.t.router.gateway.inFlight, 3);
  await c.leave();
  const metrics = await (await fetch(`${c.t.url}/metrics`)).text();
  assertMatch(
    metrics,
    /tidegate_queue_exits_total\{model="test-model",priority="0",cause="held",result="admitted"\} 2/,
  );
}

const stalling = { engine: "stall", recheckMs: 600_000, stream: true, timeScale: 3 } as const;

Deno.test("a held request goes when the first token of the one ahead comes, not when it ends", async () => {
  const c = await cluster(0, stalling);
  try {
    await heldUntilFirstTokens(c);
  } finally {
    await c.end();
  }
});

Deno.test("after a reload rebuilds the model's runtime, a prefill's end still releases the held", async () => {
  const c = await cluster(0, stalling);
  try {
    const config = c.t.router.config;
    const [model] = config.models;
    const prefillModel = { linear: 1, quadratic: 0, constant: 0.001 }; // was constant 0
    const result = await c.t.router.reload({ ...config, models: [{ ...model, prefillModel }] });
    assert(result.ok && result.plan.rebuild.includes(MODEL), JSON.stringify(result));
    await heldUntilFirstTokens(c);
  } finally {
    await c.end();
  }
});

Deno.test("a held request predicts nothing while held, and still sees what the request ahead of it is prefilling", async () => {
  const c = await cluster(0);
  try {
    // What other replicas would learn (src/cluster/shared_state.ts): a dispatch's predicted keys.
    let predictions = 0;
    c.t.router.registry.runtime(MODEL)!.predicted!.observe(() => predictions++);
    const a = c.send(1_000_000); // a document
    await eventually(() => c.received().length === 1, 10_000, "the first goes");
    const b = c.send(1_000_000); // the same document again: held
    await eventually(() => c.waiting() === 1, 10_000, "the second is held");
    assertEquals(predictions, 1, "a held request reserves nothing and predicts nothing");
    a.abort();
    await eventually(() => c.received().length === 2, 10_000, "the second goes");
    assertEquals(predictions, 2);
    b.abort();
    await eventually(() => c.t.router.gateway.inFlight === 0, 10_000, "both ended");
    const [second, first] = c.t.router.decisions.recent(2);
    assertEquals(first.candidates[0].localPrefixTokens, 0, "the first prefilled the document");
    // 62 whole 16-token chunks of the 1,000-token prompt, predicted on the engine the first went to.
    assertEquals(second.candidates[0].localPrefixTokens, 992);
  } finally {
    await c.end();
  }
});

Deno.test("without holdAboveTokens admitted requests go at once, whatever is waiting", async () => {
  const c = await cluster();
  try {
    for (const first of [1_000_000, 2_000_000, 3_000_000]) c.send(first);
    await eventually(() => c.received().length === 3, 10_000, "all three reach the engine");
    assertEquals(c.waiting(), 0);
  } finally {
    await c.end();
  }
});

Deno.test("late binding holds no newcomer behind requests admission refused: one that fits goes", async () => {
  // A bound no queue reaches: only the refused requests wait.
  const c = await cluster(1_000_000_000);
  try {
    c.send(1_000_000, 20_000);
    await eventually(() => c.received().includes(1_000_000), 10_000, "the first goes");
    // 50k tokens each: 70 s predicted behind the first, past the 60 s SLO; 50 s idle: they wait.
    for (let i = 0; i < 9; i++) c.send(2_000_000 + i * 100_000, 50_000);
    await eventually(() => c.waiting() === 9, 10_000, "nine refused requests wait");
    c.send(9_000_000);
    await eventually(() => c.received().includes(9_000_000), 10_000, "the newcomer goes at once");
    assertEquals(c.waiting(), 9);
  } finally {
    await c.end();
  }
});

Deno.test("late binding holds nothing when no instance is healthy: 503 at once, as without it", async () => {
  const { router, url } = await startRouter([loadOnlyModel("m", {
    slo: { ttftS: 60, admission: true, queue: { enabled: true, holdAboveTokens: 0 } },
    health: { failuresToOpen: 1, intervalMs: 60_000 },
    instances: [{ id: "e0", url: "http://127.0.0.1:9" }],
  })], { background: false });
  try {
    router.registry.runtime("m")!.cluster.get("e0")!.breaker.recordFailure("probe", "connect");
    const response = await completion(url, { model: "m", prompt: [1, 2, 3] });
    assertEquals(response.status, 503);
    assertEquals((await response.json()).error.code, "no_healthy_instance");
    assertEquals(router.gateway.queueLengths().get("m")?.size ?? 0, 0);
  } finally {
    await router.close();
  }
});

Deno.test("a held request its TTL ends gets 429 queue_timeout with Retry-After", async () => {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const c = await cluster(0, { ttlS: 1, tracerProvider });
  try {
    c.send(1_000_000);
    await eventually(() => c.received().includes(1_000_000), 10_000, "the first goes");
    const answer = await completion(c.t.url, { prompt: range(2_000_000, 1_000), max_tokens: 1 });
    assertEquals(answer.status, 429);
    assertEquals((await answer.json()).error.code, "queue_timeout");
    assert(answer.headers.get("retry-after") !== null);
    assertEquals(c.waiting(), 0);
    const metrics = await (await fetch(`${c.t.url}/metrics`)).text();
    assertMatch(
      metrics,
      /tidegate_queue_exits_total\{model="test-model",priority="0",cause="held",result="expired"\} 1/,
    );
    assert(!/cause="refused"/.test(metrics), "admission refused nothing");
    const queue = exporter.getFinishedSpans().find((span) => span.name === "queue");
    assertEquals(queue?.attributes["tidegate.queue.cause"], "held");
    assertEquals(queue?.attributes["tidegate.queue.result"], "expired");
  } finally {
    await c.end();
  }
});

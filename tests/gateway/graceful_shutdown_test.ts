/**
 * Shutdown in the order load balancers need: `/readyz` fails first while requests are still
 * served, in-flight answers drain up to a deadline, what is left ends with an error event (the
 * engine not charged, every lease released), and `cli/main.ts start` exits 0 on SIGTERM.
 */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { completion, MODEL, range, startTestCluster } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import { startRouterProcess, writeRouterConfig } from "../support/router_process.ts";

const PROMPT = range(1000, 200);

/** Reads a stream until its first chunk arrived; the rest stays for the caller. */
async function firstChunk(response: Response): Promise<ReadableStreamDefaultReader<Uint8Array>> {
  const reader = response.body!.getReader();
  const { value, done } = await reader.read();
  assert(!done && value.length > 0, "the stream started");
  return reader;
}

async function rest(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return text + decoder.decode();
    text += decoder.decode(value, { stream: true });
  }
}

Deno.test("draining: /readyz fails at once, new requests are still served during the ready delay, and an in-flight stream finishes", async () => {
  // 40 tokens at 25 ms: the stream outlives the ready delay's start.
  const t = await startTestCluster({
    engines: 1,
    engine: { timeScale: 1, decodeSecondsPerToken: 0.025 },
  });
  try {
    const streaming = await completion(t.url, { prompt: PROMPT, stream: true, max_tokens: 40 });
    const reader = await firstChunk(streaming);
    const drained = t.router.drain({ readyDelayMs: 1_500, drainTimeoutMs: 20_000 });
    const ready = await fetch(`${t.url}/readyz`);
    assertEquals(ready.status, 503);
    assertEquals((await ready.json()).status, "draining");
    const during = await completion(t.url, { prompt: PROMPT, max_tokens: 2 });
    assertEquals(during.status, 200, "served while load balancers take the router out");
    await during.body?.cancel();
    const text = await rest(reader);
    assertMatch(text, /data: \[DONE\]/);
    assert(!text.includes("router_shutting_down"), "the stream drained, nobody cut it");
    assertEquals(await drained, "drained");
  } finally {
    await t.close();
  }
});

Deno.test("past the drain deadline a stalled stream ends with an error event, the engine is not charged, and leases return to zero", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    await t.engines[0].setFailure("stall");
    const streaming = await completion(t.url, { prompt: PROMPT, stream: true, max_tokens: 8 });
    const reader = await firstChunk(streaming);
    const started = performance.now();
    const outcome = await t.router.drain({ readyDelayMs: 0, drainTimeoutMs: 200 });
    assertEquals(outcome, "cut");
    assert(performance.now() - started < 5_000, "the deadline bounds the drain");
    const text = await rest(reader);
    assertMatch(text, /"code":"router_shutting_down"/);
    const runtime = t.router.registry.runtime(MODEL)!;
    assertEquals(runtime.cluster.get("e0")!.breaker.snapshot().lastFailure, undefined);
    const account = runtime.cluster.account;
    await eventually(
      () => account.load("e0").decodeRequests === 0 && account.load("e0").prefillRequests === 0,
      2_000,
      "leases released",
    );
  } finally {
    await t.close();
  }
});

Deno.test("a request still waiting for the engine's headers at the cut gets a 503 in OpenAI's shape", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    await t.engines[0].setFailure("hang", { allEndpoints: false });
    const waiting = completion(t.url, { prompt: PROMPT, max_tokens: 4 });
    await eventually(
      () => t.engines[0].stats.requests.length > 0,
      5_000,
      "the engine got the request",
    );
    assertEquals(await t.router.drain({ readyDelayMs: 0, drainTimeoutMs: 100 }), "cut");
    const response = await waiting;
    assertEquals(response.status, 503);
    assertEquals((await response.json()).error.code, "router_shutting_down");
  } finally {
    await t.close();
  }
});

/** `cli/main.ts start` with `shutdown` settings in front of one engine that stalls every stream. */
async function stalledRouterProcess(shutdown: Record<string, number>) {
  const engine = startFakeEngine({ id: "e0", model: MODEL, timeScale: 0.001 });
  const config = await writeRouterConfig({
    shutdown,
    models: [{
      name: MODEL,
      tokenizer: { mode: "none" },
      kv: { store: "none" },
      health: { intervalMs: 60_000, timeoutMs: 500 },
      instances: [{ id: "e0", url: engine.url }],
    }],
  });
  const router = await startRouterProcess(config.path);
  await engine.setFailure("stall");
  return {
    router,
    async close() {
      await router.stop();
      await engine.close();
      await config.remove();
    },
  };
}

Deno.test("cli/main.ts start on SIGTERM ends a hung stream with an error event and exits 0 within its drain deadline", async () => {
  const { router, close } = await stalledRouterProcess({ readyDelayMs: 100, drainTimeoutMs: 300 });
  try {
    const streaming = await completion(router.url, { prompt: PROMPT, stream: true });
    const reader = await firstChunk(streaming);
    const signalled = performance.now();
    router.kill("SIGTERM");
    const text = await rest(reader);
    assertMatch(text, /"code":"router_shutting_down"/);
    const status = await router.status;
    assertEquals(status.code, 0);
    assert(
      performance.now() - signalled < 10_000,
      "exited near its 0.4 s drain, not when clients gave up",
    );
    assert(router.log.some((line) => line.includes('"outcome":"cut"')), router.log.join("\n"));
  } finally {
    await close();
  }
});

Deno.test("a second SIGTERM skips what is left of a long drain: the stream ends with its error event and the process exits 0", async () => {
  const { router, close } = await stalledRouterProcess({
    readyDelayMs: 60_000,
    drainTimeoutMs: 60_000,
  });
  try {
    const streaming = await completion(router.url, { prompt: PROMPT, stream: true });
    const reader = await firstChunk(streaming);
    router.kill("SIGTERM");
    await eventually(() => router.log.some((line) => line.includes("draining")), 10_000, "drain");
    const hurried = performance.now();
    router.kill("SIGTERM");
    assertMatch(await rest(reader), /"code":"router_shutting_down"/);
    assertEquals((await router.status).code, 0);
    assert(performance.now() - hurried < 15_000, "not the 120 s the two waits would take");
  } finally {
    await close();
  }
});

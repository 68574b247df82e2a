/**
 * An engine that sends its headers and then nothing: the router's idle timeout ends the answer
 * (an SSE error event, or a broken non-stream body), charges the engine and gives the lease back.
 */
import { assert, assertEquals, assertMatch, assertRejects } from "../assert.ts";
import { completion, MODEL, range, startTestCluster } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";

const PROMPT = range(1000, 200);

Deno.test("a stream that goes silent ends with an error event after the idle timeout, and the engine is charged", async () => {
  const t = await startTestCluster({ engines: 1, top: { limits: { upstreamIdleTimeoutMs: 300 } } });
  try {
    await t.engines[0].setFailure("stall");
    const started = performance.now();
    const response = await completion(t.url, { prompt: PROMPT, stream: true, max_tokens: 8 });
    assertEquals(response.status, 200);
    const text = await response.text();
    assert(performance.now() - started < 10_000, "ended by the router, not by the engine");
    assertMatch(text, /^data: \{/);
    assertMatch(text, /"code":"upstream_stream_failed"/);
    assertMatch(text, /sent nothing for 300 ms/);
    const breaker = t.router.registry.runtime(MODEL)!.cluster.get("e0")!.breaker;
    assertEquals(breaker.snapshot().lastFailure?.kind, "timeout");
    const account = t.router.registry.runtime(MODEL)!.cluster.account;
    await eventually(() => account.load("e0").decodeRequests === 0, 2_000, "lease released");
  } finally {
    await t.close();
  }
});

Deno.test("a non-streamed answer cut by the idle timeout reaches the client broken, never as a clean 200", async () => {
  const t = await startTestCluster({ engines: 1, top: { limits: { upstreamIdleTimeoutMs: 300 } } });
  try {
    await t.engines[0].setFailure("stall");
    const response = await completion(t.url, { prompt: PROMPT, max_tokens: 8 });
    assertEquals(response.status, 200);
    await assertRejects(() => response.text());
    const account = t.router.registry.runtime(MODEL)!.cluster.account;
    await eventually(
      () => account.load("e0").decodeRequests === 0 && account.load("e0").prefillRequests === 0,
      2_000,
      "lease released",
    );
  } finally {
    await t.close();
  }
});

Deno.test("a non-streamed body the engine cuts short is cut short for the client, never a clean 200", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    await t.engines[0].setFailure("midstream");
    const response = await completion(t.url, { prompt: PROMPT, max_tokens: 8 });
    assertEquals(response.status, 200);
    await assertRejects(() => response.text());
    const breaker = t.router.registry.runtime(MODEL)!.cluster.get("e0")!.breaker;
    assertEquals(breaker.snapshot().lastFailure?.kind, "other");
  } finally {
    await t.close();
  }
});

Deno.test("an engine cut in the middle of an SSE line: the client gets whole events, then the error event", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    await t.engines[0].setFailure("midline");
    for (const usage of [true, false]) {
      const response = await completion(t.url, {
        prompt: PROMPT,
        stream: true,
        max_tokens: 8,
        ...(usage ? { stream_options: { include_usage: true } } : {}),
      });
      assertEquals(response.status, 200);
      const events = (await response.text()).split("\n\n");
      assertEquals(events.at(-1), "", "the stream ends with a blank line");
      const payloads = events.slice(0, -1).map((event) => {
        assertMatch(event, /^data: /);
        return JSON.parse(event.slice("data: ".length));
      });
      assertEquals(payloads.length, 2, "the first token, then the router's error");
      assertEquals(payloads[0].choices[0].text.length > 0, true);
      assertEquals(payloads[1].error.code, "upstream_stream_failed");
    }
  } finally {
    await t.close();
  }
});

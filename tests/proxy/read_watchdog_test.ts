/**
 * One timer per body bounds every read by the idle timeout and the whole body by its deadline
 * (src/proxy/read_watchdog.ts). Deno's op sanitizer fails a test that leaves a timer behind.
 */
import { assert, assertEquals, assertRejects } from "../assert.ts";
import { ReadWatchdog, UpstreamStalledError } from "../../src/proxy/read_watchdog.ts";

const encoder = new TextEncoder();

/** A body that sends `count` chunks `gapMs` apart, then ends (or, with `count` Infinity, never). */
function trickle(count: number, gapMs: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    async pull(controller) {
      if (sent >= count) return controller.close();
      if (sent > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
      controller.enqueue(encoder.encode(`chunk ${sent++}\n`));
    },
  }, { highWaterMark: 0 });
}

/** Reads until the end; returns the chunks read, or throws what the watchdog threw. */
async function readAll(watchdog: ReadWatchdog): Promise<number> {
  let chunks = 0;
  try {
    for (;;) {
      const { done } = await watchdog.read();
      if (done) return chunks;
      chunks++;
    }
  } finally {
    watchdog.dispose();
  }
}

Deno.test("reads slower than nothing but each within the idle limit are never stopped", async () => {
  // The body lasts about 800 ms, twice the idle limit: the one timer fires while a later read is
  // pending and must re-arm for that read instead of stopping it.
  const watchdog = new ReadWatchdog(trickle(9, 100).getReader(), {
    idleTimeoutMs: 400,
    maxDurationMs: 60_000,
  });
  assertEquals(await readAll(watchdog), 9);
});

Deno.test("a silent engine is stopped after the idle limit, with the idle reason", async () => {
  const silent = new ReadableStream<Uint8Array>({ pull: () => new Promise(() => {}) });
  const started = performance.now();
  const watchdog = new ReadWatchdog(silent.getReader(), {
    idleTimeoutMs: 80,
    maxDurationMs: 60_000,
  });
  const error = await assertRejects(() => readAll(watchdog), UpstreamStalledError);
  assertEquals(error.message, "the engine sent nothing for 80 ms");
  assert(performance.now() - started >= 79, "not before the idle limit");
});

Deno.test("an engine that keeps sending is stopped at the answer's deadline, with that reason", async () => {
  const watchdog = new ReadWatchdog(trickle(Infinity, 10).getReader(), {
    idleTimeoutMs: 10_000,
    maxDurationMs: 150,
  });
  const error = await assertRejects(() => readAll(watchdog), UpstreamStalledError);
  assertEquals(error.message, "the answer took longer than 150 ms");
});

Deno.test("the abort signal stops a pending read at once, and a later read, with its reason", async () => {
  const abort = new AbortController();
  const silent = new ReadableStream<Uint8Array>({ pull: () => new Promise(() => {}) });
  const watchdog = new ReadWatchdog(silent.getReader(), {
    idleTimeoutMs: 60_000,
    maxDurationMs: 60_000,
    abort: abort.signal,
  });
  const pending = watchdog.read();
  abort.abort(new Error("router shutting down"));
  await assertRejects(() => pending, Error, "router shutting down");
  await assertRejects(() => watchdog.read(), Error, "router shutting down");
  watchdog.dispose();

  const already = new ReadWatchdog(trickle(3, 0).getReader(), {
    idleTimeoutMs: 60_000,
    maxDurationMs: 60_000,
    abort: abort.signal,
  });
  await assertRejects(() => readAll(already), Error, "router shutting down");
});

Deno.test("time the reader spends between reads is not the engine's silence", async () => {
  const watchdog = new ReadWatchdog(trickle(3, 0).getReader(), {
    idleTimeoutMs: 50,
    maxDurationMs: 60_000,
  });
  assertEquals((await watchdog.read()).done, false);
  // A slow client: no read is pending, so the timer that fires meanwhile stops nothing.
  await new Promise((resolve) => setTimeout(resolve, 150));
  assertEquals((await watchdog.read()).done, false);
  assertEquals((await watchdog.read()).done, false);
  assertEquals((await watchdog.read()).done, true);
  watchdog.dispose();
});

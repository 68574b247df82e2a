import assert from "node:assert/strict";
import { FetchTimeoutError, fetchWithTimeout } from "../../src/cluster/fetch_timeout.ts";
import { ManualTime } from "./manual_time.ts";

/** A fetch whose answer's headers come at once and whose body never ends (until aborted). */
const stallingBodyFetch: typeof fetch = (_input, init) => {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode("partial"));
      init?.signal?.addEventListener("abort", () => controller.error(init.signal!.reason));
    },
  });
  return Promise.resolve(new Response(body));
};

Deno.test("fetchWithTimeout() times out a body that stalls after the headers", async () => {
  const time = new ManualTime();
  const reading = fetchWithTimeout(
    "http://x/metrics",
    { fetch: stallingBodyFetch, timers: time, timeoutMs: 100 },
    (response) => response.text(),
  );
  const rejected = assert.rejects(
    reading,
    (e: Error) =>
      e instanceof FetchTimeoutError && /http:\/\/x\/metrics within 100 ms/.test(e.message),
  );
  await time.advance(100);
  await rejected;
  assert.equal(time.pendingTimers, 0);
});

Deno.test("fetchWithTimeout() times out even a fetch that ignores its abort signal", async () => {
  const time = new ManualTime();
  const reading = fetchWithTimeout(
    "http://x/",
    { fetch: () => new Promise<Response>(() => {}), timers: time, timeoutMs: 50 },
    (response) => response.text(),
  );
  const rejected = assert.rejects(reading, FetchTimeoutError);
  await time.advance(50);
  await rejected;
});

Deno.test("fetchWithTimeout() passes other errors through and clears its timer on success", async () => {
  const time = new ManualTime();
  await assert.rejects(
    fetchWithTimeout(
      "http://x/",
      { fetch: () => Promise.reject(new TypeError("refused")), timers: time, timeoutMs: 50 },
      (r) => r.text(),
    ),
    (e: Error) => e instanceof TypeError && e.message === "refused",
  );
  const text = await fetchWithTimeout(
    "http://x/",
    { fetch: () => Promise.resolve(new Response("ok")), timers: time, timeoutMs: 50 },
    (r) => r.text(),
  );
  assert.equal(text, "ok");
  assert.equal(time.pendingTimers, 0);
});

/**
 * One timer per body bounds every read by the idle timeout and the whole body by its deadline
 * (src/proxy/read_watchdog.ts), on a hand-driven clock (tests/cluster/manual_time.ts).
 */
import { assert, assertEquals, assertRejects } from "../assert.ts";
import { ManualTime, settle } from "../cluster/manual_time.ts";
import {
  type BodyLimits,
  ReadWatchdog,
  UpstreamStalledError,
} from "../../src/proxy/read_watchdog.ts";

const encoder = new TextEncoder();

/** A body the test feeds chunk by chunk. */
function fedBody() {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const stream = new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) });
  return {
    reader: stream.getReader(),
    send: (text: string) => controller.enqueue(encoder.encode(text)),
    end: () => controller.close(),
  };
}

function watched(limits: Partial<BodyLimits>) {
  const time = new ManualTime(1_000);
  const body = fedBody();
  const watchdog = new ReadWatchdog(
    body.reader,
    { idleTimeoutMs: 60_000, maxDurationMs: 600_000, ...limits },
    time,
  );
  return { time, body, watchdog };
}

/** Whether `promise` has settled once pending continuations ran. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(() => done = true, () => done = true);
  await settle();
  return done;
}

Deno.test("a body longer than the idle limit whose every read is within it is never stopped", async () => {
  // 900 ms of reads 100 ms apart against a 400 ms idle limit: the one timer fires while a later
  // read is pending and must re-arm for that read instead of stopping it.
  const { time, body, watchdog } = watched({ idleTimeoutMs: 400 });
  for (let chunk = 0; chunk < 9; chunk++) {
    const read = watchdog.read();
    await time.advance(100);
    body.send(`chunk ${chunk}\n`);
    assertEquals((await read).done, false);
  }
  body.end();
  assertEquals((await watchdog.read()).done, true);
  watchdog.dispose();
  assertEquals(time.pendingTimers, 0, "no timer left behind");
});

Deno.test("a silent engine is stopped at the idle limit, not before, with the idle reason", async () => {
  const { time, watchdog } = watched({ idleTimeoutMs: 80 });
  const read = watchdog.read();
  await time.advance(79);
  assert(!(await settled(read)), "still waiting 1 ms before the limit");
  await time.advance(1);
  const error = await assertRejects(() => read, UpstreamStalledError);
  assertEquals(error.message, "the engine sent nothing for 80 ms");
  assertEquals(time.pendingTimers, 0);
});

Deno.test("an engine that keeps sending is stopped at the answer's deadline, with that reason", async () => {
  const { time, body, watchdog } = watched({ idleTimeoutMs: 10_000, maxDurationMs: 150 });
  let stopped: unknown;
  for (let sent = 0; sent < 100 && !stopped; sent++) {
    const read = watchdog.read().catch((error) => stopped = error);
    await time.advance(10);
    if (!stopped) body.send("token\n");
    await read;
  }
  assert(stopped instanceof UpstreamStalledError, String(stopped));
  assertEquals(stopped.message, "the answer took longer than 150 ms");
  assertEquals(time.nowMs, 1_150, "stopped at the deadline");
});

Deno.test("an engine whose data is always ready is still stopped at the answer's deadline", async () => {
  // Every read resolves at once, before a timer could fire: the deadline is checked per read.
  const { time, body, watchdog } = watched({ maxDurationMs: 60 });
  for (let i = 0; i < 5; i++) body.send("data\n");
  assertEquals((await watchdog.read()).done, false);
  await time.advance(100); // a slow client: the reads come after the deadline
  const error = await assertRejects(() => watchdog.read(), UpstreamStalledError);
  assertEquals(error.message, "the answer took longer than 60 ms");
  assertEquals(time.pendingTimers, 0);
});

Deno.test("the abort signal stops a pending read at once, and a later read, with its reason", async () => {
  const abort = new AbortController();
  const { time, watchdog } = watched({ abort: abort.signal });
  const pending = watchdog.read();
  abort.abort(new Error("router shutting down"));
  await assertRejects(() => pending, Error, "router shutting down");
  await assertRejects(() => watchdog.read(), Error, "router shutting down");
  assertEquals(time.pendingTimers, 0);

  const already = new ReadWatchdog(fedBody().reader, {
    idleTimeoutMs: 60_000,
    maxDurationMs: 60_000,
    abort: abort.signal,
  }, new ManualTime());
  await assertRejects(() => already.read(), Error, "router shutting down");
});

Deno.test("time the reader spends between reads is not the engine's silence", async () => {
  const { time, body, watchdog } = watched({ idleTimeoutMs: 50 });
  body.send("a\n");
  body.send("b\n");
  assertEquals((await watchdog.read()).done, false);
  // A slow client: no read is pending, so the timer that fires meanwhile stops nothing.
  await time.advance(150);
  assertEquals((await watchdog.read()).done, false);
  const third = watchdog.read();
  await time.advance(49);
  body.end();
  assertEquals((await third).done, true);
  watchdog.dispose();
  assertEquals(time.pendingTimers, 0);
});

Deno.test("a limit past what a timer can hold is waited for in steps a timer can take", async () => {
  // Real timers turn a delay over 2^31-1 ms into 1 ms, which would fire and re-arm at once.
  const time = new ManualTime();
  const delays: number[] = [];
  const clock = {
    now: time.now,
    setTimeout: (
      callback: () => void,
      ms: number,
    ) => (delays.push(ms), time.setTimeout(callback, ms)),
    clearTimeout: (handle: unknown) => time.clearTimeout(handle),
  };
  const limits = { idleTimeoutMs: 2 ** 33, maxDurationMs: 2 ** 34 };
  const watchdog = new ReadWatchdog(fedBody().reader, limits, clock);
  const read = watchdog.read();
  await time.advance(2 ** 31);
  assert(!(await settled(read)), "still waiting");
  assertEquals(delays, [2 ** 31 - 1, 2 ** 31 - 1], "one step, then one more for the rest");
  watchdog.dispose();
});

import { assertEquals } from "../assert.ts";
import { ManualTime } from "../cluster/manual_time.ts";
import { EventLoopLag, type EventLoopLagOptions } from "../../src/telemetry/event_loop_lag.ts";

/** A monitor on a hand-driven clock; `ticks` holds when each tick ran and the lag it saw (ms). */
function monitor(options: Partial<EventLoopLagOptions> = {}) {
  const time = new ManualTime(1_000);
  const ticks: { atMs: number; lagMs: number }[] = [];
  const lag = new EventLoopLag({
    now: time.now,
    timers: time,
    observe: (lagS) => ticks.push({ atMs: time.nowMs, lagMs: lagS * 1000 }),
    ...options,
  });
  return { time, ticks, lag };
}

const gaps = (ticks: { atMs: number }[]) => ticks.slice(1).map((t, i) => t.atMs - ticks[i].atMs);

Deno.test("without a CPU reading the loop is measured every 20 ms", async () => {
  const { time, ticks, lag } = monitor();
  lag.start();
  await time.advance(100);
  assertEquals(ticks.map((t) => t.atMs), [1_020, 1_040, 1_060, 1_080, 1_100]);
  assertEquals(ticks.every((t) => t.lagMs === 0), true);
  lag.stop();
  assertEquals(time.pendingTimers, 0);
});

Deno.test("an idle router is measured every 500 ms, one that works every 20 ms", async () => {
  // The process's CPU grows by a tenth of the clock while it works, not at all while it waits.
  let working = false;
  let cpuMs = 0;
  let lastMs = 1_000;
  const { time, ticks, lag } = monitor({
    cpuMs: () => {
      if (working) cpuMs += (time.nowMs - lastMs) / 10;
      lastMs = time.nowMs;
      return cpuMs;
    },
  });
  lag.start();
  await time.advance(1_020); // the first tick at 20 ms, then idle ones
  assertEquals(gaps(ticks), [500, 500]);
  working = true;
  await time.advance(560);
  assertEquals(gaps(ticks).slice(2), [500, 20, 20, 20]);
  working = false;
  await time.advance(1_100); // idle again: back to 500 ms after one short tick
  assertEquals(gaps(ticks).slice(6), [20, 500, 500]);
  lag.stop();
});

Deno.test("a late tick is measured, and the next one comes at 20 ms even when idle", async () => {
  const { time, ticks, lag } = monitor({ cpuMs: () => 0 });
  lag.start();
  await time.advance(20);
  time.nowMs += 500 + 300; // the loop held past the idle tick's due time by 300 ms
  await time.advance(0);
  assertEquals(ticks.at(-1)!.lagMs, 300);
  await time.advance(20);
  assertEquals(ticks.at(-1)!.atMs - ticks.at(-2)!.atMs, 20);
  assertEquals(lag.maxMs, 300);
  lag.stop();
});

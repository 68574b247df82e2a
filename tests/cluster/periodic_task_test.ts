import assert from "node:assert/strict";
import { PeriodicTask } from "../../src/cluster/periodic_task.ts";
import { ManualTime, settle } from "./manual_time.ts";

Deno.test("PeriodicTask never overlaps rounds: an overrun delays the next one", async () => {
  const time = new ManualTime();
  const starts: number[] = [];
  let running = 0;
  const task = new PeriodicTask(
    async () => {
      starts.push(time.nowMs);
      running++;
      assert.equal(running, 1, "one round at a time");
      // The second round takes 250 ms, longer than the 100 ms interval.
      await new Promise<void>((resolve) =>
        time.setTimeout(resolve, starts.length === 2 ? 250 : 10)
      );
      running--;
    },
    100,
    time,
    time.now,
  );
  task.start();
  await settle();
  await time.advance(600);
  assert.deepEqual(starts, [0, 100, 350, 450, 550]);
  await task.stop();
  assert.equal(time.pendingTimers, 0);
});

Deno.test("PeriodicTask keeps going after a round fails", async () => {
  const time = new ManualTime();
  let rounds = 0;
  const task = new PeriodicTask(
    () => {
      rounds++;
      return Promise.reject(new Error("boom"));
    },
    100,
    time,
    time.now,
  );
  task.start();
  await time.advance(300);
  assert.equal(rounds, 4);
  await task.stop();
  assert.throws(() => new PeriodicTask(() => Promise.resolve(), 0, time, time.now), /positive/);
});

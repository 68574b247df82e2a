/**
 * FlowControl's waiting on a hand-driven clock: the recheck timer is not pushed back by arrivals,
 * a pass re-plans past a request that does not fit, a client that leaves is dropped and its timer
 * goes with it, and draining answers everyone.
 */
import { assertEquals } from "../assert.ts";
import { FlowControl, type WaitOutcome, type WaitRequest } from "../../src/gateway/flow_control.ts";
import type { Timers } from "../../src/cluster/timers.ts";

const QUEUE = {
  enabled: true,
  maxRequests: 100,
  maxPromptTokens: 1_000_000,
  ttlS: 30,
  recheckMs: 50,
};

/** Timers on a clock the test moves. */
class ManualClock implements Timers {
  now = 0;
  #next = 1;
  readonly pending = new Map<number, { at: number; fn: () => void }>();
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.pending.set(id, { at: this.now + ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  /** Moves the clock, firing what falls due in order; lets the pumps' promises settle. */
  async advance(ms: number): Promise<void> {
    const until = this.now + ms;
    for (;;) {
      const due = [...this.pending].filter(([, t]) => t.at <= until)
        .sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.pending.delete(due[0]);
      this.now = due[1].at;
      due[1].fn();
      await settle();
    }
    this.now = until;
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

function setup() {
  const clock = new ManualClock();
  const draining = new AbortController();
  const flow = new FlowControl({
    now: () => clock.now,
    timers: clock,
    draining: draining.signal,
  });
  return { clock, draining, flow };
}

function request(over: Partial<WaitRequest> & Pick<WaitRequest, "replan">): WaitRequest {
  return { priority: 0, tenant: "", weight: 1, promptTokens: 100, deadlineMs: 30_000, ...over };
}

Deno.test("arrivals faster than recheckMs do not push the recheck back", async () => {
  const { clock, flow } = setup();
  let replans = 0;
  const replan = () => {
    replans++;
    return Promise.resolve(false);
  };
  for (let i = 0; i < 100; i++) {
    void flow.wait("m", QUEUE, request({ replan }));
    await clock.advance(20); // an arrival every 20 ms for 2 s
  }
  // One pass per 50 ms recheck, each re-planning every waiting request up to the window.
  assertEquals(replans > 30, true, `${replans} re-plans in 2 s`);
});

Deno.test("a pass re-plans past requests that do not fit: one behind them that fits is admitted", async () => {
  const { clock, flow } = setup();
  const outcomes: string[] = [];
  const never = () => Promise.resolve(false);
  for (let i = 0; i < 3; i++) {
    void flow.wait("m", QUEUE, request({ replan: never })).then((o) =>
      outcomes.push(`big${i}:${o.kind}`)
    );
  }
  let fits = false;
  const small = flow.wait("m", QUEUE, request({ replan: () => Promise.resolve(fits) }));
  fits = true;
  await clock.advance(50);
  assertEquals((await small).kind, "admitted");
  assertEquals(flow.waiting("m"), 3, "the three that do not fit still wait");
  assertEquals(outcomes, []);
});

Deno.test("a client that leaves is dropped at once; with nobody left no timer stays armed", async () => {
  const { clock, flow } = setup();
  const leave = new AbortController();
  const waited = flow.wait(
    "m",
    QUEUE,
    request({
      replan: () => Promise.resolve(false),
      signal: leave.signal,
    }),
  );
  assertEquals(clock.pending.size, 1);
  leave.abort();
  assertEquals(((await waited) as WaitOutcome).kind, "aborted");
  assertEquals(flow.waiting("m"), 0);
  assertEquals(clock.pending.size, 0, "the recheck timer went with the last request");
});

Deno.test("a deadline ends the wait as expired; draining answers everyone shutting_down", async () => {
  const { clock, draining, flow } = setup();
  const never = () => Promise.resolve(false);
  const soon = flow.wait("m", QUEUE, request({ replan: never, deadlineMs: 120 }));
  const later = flow.wait("m", QUEUE, request({ replan: never }));
  await clock.advance(200);
  assertEquals((await soon).kind, "expired");
  draining.abort();
  assertEquals((await later).kind, "shutting_down");
  assertEquals(
    (await flow.wait("m", QUEUE, request({ replan: never }))).kind,
    "shutting_down",
    "no newcomer waits once draining began",
  );
  assertEquals(clock.pending.size, 0);
});

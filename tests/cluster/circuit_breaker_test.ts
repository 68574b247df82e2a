import assert from "node:assert/strict";
import { type BreakerState, CircuitBreaker } from "../../src/cluster/circuit_breaker.ts";

function breaker(options: Partial<ConstructorParameters<typeof CircuitBreaker>[0]> = {}) {
  let now = 0;
  const changes: string[] = [];
  const b = new CircuitBreaker({
    now: () => now,
    failureThreshold: 3,
    successThreshold: 2,
    coolDownMs: 1000,
    onStateChange: ({ from, to }) => changes.push(`${from}->${to}`),
    ...options,
  });
  return { b, changes, advance: (ms: number) => (now += ms) };
}

Deno.test("a breaker opens after 3 consecutive failures and refuses requests", () => {
  const { b, changes } = breaker();
  b.recordFailure("request", "connect");
  b.recordFailure("probe", "timeout");
  assert.equal(b.state, "closed");
  b.recordSuccess("request"); // resets the run
  b.recordFailure("request", "http_5xx");
  b.recordFailure("request", "http_5xx");
  assert.equal(b.state, "closed");
  b.recordFailure("probe", "connect");
  assert.equal(b.state, "open");
  assert.equal(b.available, false);
  assert.equal(b.tryAcquire(), undefined);
  const snapshot = b.snapshot();
  assert.equal(snapshot.counters.opened, 1);
  assert.equal(snapshot.counters.failures, 5);
  assert.equal(snapshot.counters.probeFailures, 2);
  assert.equal(snapshot.counters.requestFailures, 3);
  assert.equal(snapshot.counters.rejected, 1);
  assert.deepEqual(snapshot.lastFailure, { kind: "connect", source: "probe", atMs: 0 });
  assert.deepEqual(changes, ["closed->open"]);
});

Deno.test("after the cool-down exactly one trial request is allowed at a time", () => {
  const { b, advance } = breaker();
  for (let i = 0; i < 3; i++) b.recordFailure("request", "connect");
  advance(999);
  assert.equal(b.state, "open");
  advance(1);
  assert.equal(b.state, "half_open");
  const trial = b.tryAcquire();
  assert.ok(trial?.trial);
  assert.equal(b.tryAcquire(), undefined, "a second request waits for the trial");
  assert.equal(b.snapshot().trialInFlight, true);
  trial.success();
  assert.equal(b.state, "half_open", "one success of two");
  const second = b.tryAcquire();
  assert.ok(second?.trial, "the next trial may go once the first reported");
  second.success();
  assert.equal(b.state, "closed");
  const normal = b.tryAcquire();
  assert.equal(normal?.trial, false);
  assert.ok(b.tryAcquire(), "closed: no limit");
  assert.equal(b.snapshot().counters.trials, 2);
});

Deno.test("a failed trial reopens the breaker and restarts the cool-down", () => {
  const { b, advance, changes } = breaker();
  for (let i = 0; i < 3; i++) b.recordFailure("request", "connect");
  advance(1000);
  const trial = b.tryAcquire()!;
  trial.failure("timeout");
  assert.equal(b.state, "open");
  advance(999);
  assert.equal(b.state, "open");
  advance(1);
  assert.equal(b.state, "half_open");
  assert.deepEqual(changes, [
    "closed->open",
    "open->half_open",
    "half_open->open",
    "open->half_open",
  ]);
  assert.equal(b.snapshot().counters.opened, 2);
});

Deno.test("a healthy probe half-opens an open breaker and a second one closes it", () => {
  const { b } = breaker({ coolDownMs: 60_000 });
  for (let i = 0; i < 3; i++) b.recordProbe({ outcome: "failed", failure: "connect" });
  assert.equal(b.state, "open");
  b.recordProbe({ outcome: "healthy" });
  assert.equal(b.state, "half_open");
  assert.equal(b.snapshot().consecutiveSuccesses, 1);
  b.recordProbe({ outcome: "healthy" });
  assert.equal(b.state, "closed");
});

Deno.test("failing probes keep an open breaker open past its cool-down", () => {
  const { b, advance } = breaker();
  for (let i = 0; i < 3; i++) b.recordProbe({ outcome: "failed", failure: "connect" });
  for (let i = 0; i < 5; i++) {
    advance(600);
    b.recordProbe({ outcome: "failed", failure: "connect" });
    assert.equal(b.state, "open", `after ${(i + 1) * 600} ms`);
  }
});

Deno.test("a starting instance gets no traffic until its health check passes", () => {
  const { b, changes } = breaker({ initialState: "starting" });
  assert.equal(b.state, "starting");
  assert.equal(b.tryAcquire(), undefined);
  for (let i = 0; i < 10; i++) b.recordProbe({ outcome: "starting" });
  assert.equal(b.state, "starting", "503 while loading is not a failure");
  b.recordProbe({ outcome: "failed", failure: "connect" });
  assert.equal(b.state, "starting", "nor is a refused connection before it ever served");
  b.recordProbe({ outcome: "healthy" });
  assert.equal(b.state, "closed");
  assert.ok(b.tryAcquire());
  assert.deepEqual(changes, ["starting->closed"]);
});

Deno.test("a 503 health answer from a serving instance counts as a failure", () => {
  const { b } = breaker();
  for (let i = 0; i < 3; i++) b.recordProbe({ outcome: "starting" });
  assert.equal(b.state, "open");
  assert.equal(b.snapshot().lastFailure?.kind, "unready");
});

Deno.test("outcomes of requests sent before the breaker opened do not count afterwards", () => {
  const { b, advance } = breaker();
  const early = [b.tryAcquire()!, b.tryAcquire()!, b.tryAcquire()!, b.tryAcquire()!];
  early[0].failure("connect");
  early[1].failure("connect");
  early[2].failure("connect");
  assert.equal(b.state, "open");
  early[3].success(); // a straggler from before: no evidence about now
  assert.equal(b.state, "open");
  advance(1000);
  const trial = b.tryAcquire()!;
  early[3].failure("connect"); // already settled: ignored
  assert.equal(b.state, "half_open");
  trial.release();
  assert.equal(b.snapshot().trialInFlight, false, "release() frees the trial slot");
  assert.equal(b.snapshot().consecutiveSuccesses, 0, "and counts nothing");
});

Deno.test("a trial that never reports frees its slot after the trial timeout", () => {
  const { b, advance } = breaker({ trialTimeoutMs: 5000, coolDownMs: 100 });
  for (let i = 0; i < 3; i++) b.recordFailure("request", "connect");
  advance(100);
  assert.ok(b.tryAcquire());
  advance(4999);
  assert.equal(b.available, false);
  advance(1);
  assert.equal(b.available, true);
  assert.ok(b.tryAcquire()?.trial);
});

Deno.test("thresholds are configurable", () => {
  const { b } = breaker({ failureThreshold: 1, successThreshold: 1 });
  b.recordFailure("request", "http_5xx");
  assert.equal(b.state, "open");
  b.recordProbe({ outcome: "healthy" });
  const states: BreakerState[] = [b.state];
  assert.deepEqual(states, ["closed"]);
});

Deno.test("with startingWhileUnproven a 503 from an instance that never served means starting, not failing", () => {
  const { b, changes } = breaker({ startingWhileUnproven: true });
  b.recordProbe({ outcome: "starting" });
  assert.equal(b.state, "starting");
  assert.equal(b.tryAcquire(), undefined, "no traffic while it loads");
  b.recordProbe({ outcome: "healthy" });
  assert.equal(b.state, "closed");
  // Once it has served, a 503 is a failure like any other.
  for (let i = 0; i < 3; i++) b.recordProbe({ outcome: "starting" });
  assert.equal(b.state, "open");
  assert.deepEqual(changes, ["closed->starting", "starting->closed", "closed->open"]);
});

import assert from "node:assert/strict";
import { EngineLoadPoller, type LoadPollTarget } from "../../src/cluster/engine_load_poller.ts";
import { LoadAccount } from "../../src/cluster/load_account.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { ManualTime, settle } from "./manual_time.ts";
import { eventually } from "../support/eventually.ts";

const getLoad = (waiting: number, pending: number) =>
  JSON.stringify([{
    dp_rank: 0,
    num_reqs: waiting + 1,
    num_waiting_reqs: waiting,
    num_tokens: 0,
    num_pending_tokens: pending,
  }]);

/** A fetch that answers from a table of URL → body (or throws), recording what it was asked. */
function tableFetch(table: Map<string, string | Error>, asked: string[] = []): typeof fetch {
  return (input: string | URL | Request) => {
    const url = String(input);
    asked.push(url);
    const answer = table.get(url);
    if (answer === undefined) return Promise.resolve(new Response("no", { status: 404 }));
    if (answer instanceof Error) return Promise.reject(answer);
    return Promise.resolve(new Response(answer));
  };
}

Deno.test("EngineLoadPoller keeps the latest report and flags it unusable once stale", async () => {
  const time = new ManualTime(1_000);
  const table = new Map<string, string | Error>([["http://a:1/get_load", getLoad(2, 5000)]]);
  const asked: string[] = [];
  const poller = new EngineLoadPoller({
    targets: () => [{ id: "a", url: "http://a:1/", source: "sglang_get_load" }],
    fetch: tableFetch(table, asked),
    now: time.now,
    timers: time,
    timeoutMs: 100,
    staleAfterMs: 500,
  });
  await poller.pollOnce();
  assert.deepEqual(asked, ["http://a:1/get_load"], "the trailing slash is not doubled");
  let state = poller.state("a");
  assert.equal(state.usable, true);
  assert.deepEqual(state.report, {
    waitingRequests: 2,
    runningRequests: 1,
    pendingPrefillTokens: 5000,
    observedAtMs: 1_000,
  });
  // The engine goes away: the old report stays, usable until it is too old.
  table.set("http://a:1/get_load", new TypeError("connection refused"));
  await time.advance(300);
  await poller.pollOnce();
  state = poller.state("a");
  assert.equal(state.usable, true);
  assert.equal(state.consecutiveFailures, 1);
  assert.match(state.lastError!, /connection refused/);
  await time.advance(201);
  state = poller.state("a");
  assert.equal(state.usable, false);
  assert.equal(state.ageMs, 501);
  assert.equal(state.report?.pendingPrefillTokens, 5000, "kept for display");
  // It comes back: fresh again, failures reset.
  table.set("http://a:1/get_load", getLoad(0, 0));
  await poller.pollOnce();
  state = poller.state("a");
  assert.equal(state.usable, true);
  assert.equal(state.consecutiveFailures, 0);
  assert.equal(state.lastError, undefined);
  assert.equal(state.report?.observedAtMs, 1_501);
  assert.deepEqual(poller.stats, { rounds: 3, polls: 3, failures: 1, timeouts: 0 });
});

Deno.test("EngineLoadPoller snapshots our account when each poll starts", async () => {
  const time = new ManualTime(0);
  const account = new LoadAccount({ now: time.now });
  const lease = account.lease("a", 4096);
  const poller = new EngineLoadPoller({
    targets: () => [{ id: "a", url: "http://a", source: "sglang_get_load" }],
    fetch: tableFetch(new Map([["http://a/get_load", getLoad(1, 4096)]])),
    now: time.now,
    timers: time,
    timeoutMs: 100,
    staleAfterMs: 1000,
    localLoad: (id) => account.load(id),
  });
  await poller.pollOnce();
  lease.firstToken();
  const state = poller.state("a");
  assert.deepEqual(state.localAtObservation, {
    prefillTokens: 4096,
    prefillRequests: 1,
    decodeRequests: 0,
  });
  assert.equal(account.load("a").prefillTokens, 0, "the snapshot is a copy");
});

Deno.test("EngineLoadPoller reports HTTP errors and format errors as failures", async () => {
  const time = new ManualTime(0);
  const poller = new EngineLoadPoller({
    targets: () => [
      { id: "missing", url: "http://m", source: "vllm_metrics" },
      { id: "wrong", url: "http://w", source: "vllm_metrics" },
    ],
    fetch: tableFetch(new Map([["http://w/metrics", "sglang:num_queue_reqs 1\n"]])),
    now: time.now,
    timers: time,
    timeoutMs: 100,
    staleAfterMs: 1000,
  });
  await poller.pollOnce();
  assert.match(poller.state("missing").lastError!, /HTTP 404 from http:\/\/m\/metrics/);
  assert.match(poller.state("wrong").lastError!, /is this a vLLM server/);
  assert.equal(poller.state("wrong").usable, false);
  assert.equal(poller.stats.failures, 2);
});

Deno.test("EngineLoadPoller times out a hung engine without waiting on the others", async () => {
  const hung = startFakeEngine({ id: "hung" });
  const fine = startFakeEngine({ id: "fine", flavour: "sglang" });
  const hung2 = startFakeEngine({ id: "hung2" });
  try {
    await hung.setFailure("hang");
    await hung2.setFailure("hang");
    const targets: LoadPollTarget[] = [
      { id: "hung", url: hung.url, source: "vllm_metrics" },
      { id: "fine", url: fine.url, source: "sglang_get_load" },
      { id: "hung2", url: hung2.url, source: "vllm_metrics" },
    ];
    // The deadlines run on a hand-driven clock: the round's length is told by the clock, not
    // measured (the wall-clock figure is tests/bench/timing_bench.ts's).
    const time = new ManualTime(0);
    const poller = new EngineLoadPoller({
      targets: () => targets,
      fetch,
      now: time.now,
      timers: time,
      timeoutMs: 100,
      staleAfterMs: 1000,
    });
    let ended = false;
    const round = poller.pollOnce().then(() => (ended = true));
    await eventually(
      () =>
        poller.states().some((s) => s.instanceId === "fine" && s.usable) &&
        time.pendingTimers === 2,
      2_000,
      "the fine engine's answer, and a deadline armed for each hung one",
    );
    await time.advance(99);
    assert.equal(ended, false, "no deadline is up before 100 ms");
    await time.advance(1);
    // Both hung engines' deadlines run from the round's start: it is over at 100 ms, not 200.
    await eventually(() => ended, 2_000, "the round to end at 100 ms");
    await round;
    assert.equal(poller.stats.timeouts, 2);
    assert.match(poller.state("hung").lastError!, /within 100 ms/);
    assert.equal(poller.state("hung").usable, false);
    assert.equal(poller.state("fine").usable, true);
    assert.equal(poller.state("fine").report?.pendingPrefillTokens, 0);
  } finally {
    await hung.close();
    await fine.close();
    await hung2.close();
  }
});

Deno.test("EngineLoadPoller polls on its interval after start() and forgets removed instances", async () => {
  const time = new ManualTime(0);
  let targets: LoadPollTarget[] = [
    { id: "a", url: "http://a", source: "sglang_get_load" },
    { id: "b", url: "http://b", source: "sglang_get_load" },
  ];
  const asked: string[] = [];
  const poller = new EngineLoadPoller({
    targets: () => targets,
    fetch: tableFetch(
      new Map([["http://a/get_load", getLoad(0, 0)], ["http://b/get_load", getLoad(0, 0)]]),
      asked,
    ),
    now: time.now,
    timers: time,
    timeoutMs: 50,
    staleAfterMs: 1000,
    intervalMs: 250,
  });
  poller.start();
  await settle();
  assert.equal(poller.stats.rounds, 1, "the first round runs at once");
  await time.advance(249);
  assert.equal(poller.stats.rounds, 1);
  await time.advance(1);
  assert.equal(poller.stats.rounds, 2);
  targets = [targets[0]];
  await time.advance(250);
  assert.equal(poller.stats.rounds, 3);
  assert.deepEqual(poller.states().map((s) => s.instanceId), ["a"]);
  await poller.stop();
  await time.advance(1000);
  assert.equal(poller.stats.rounds, 3, "no round after stop()");
  assert.equal(time.pendingTimers, 0);
  assert.equal(asked.length, 5);
});

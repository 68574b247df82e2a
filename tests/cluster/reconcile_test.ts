import assert from "node:assert/strict";
import type { EngineLoadReport } from "../../src/cluster/engine_load.ts";
import { EngineLoadPoller } from "../../src/cluster/engine_load_poller.ts";
import { type InstanceLoad, LoadAccount, type LoadLease } from "../../src/cluster/load_account.ts";
import { RecentPrefillSizes } from "../../src/cluster/recent_prefill_sizes.ts";
import { reconcileLoad } from "../../src/cluster/reconcile.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { ManualTime } from "./manual_time.ts";
import { eventually } from "../support/eventually.ts";

const load = (
  prefillTokens: number,
  prefillRequests: number,
  decodeRequests = 0,
): InstanceLoad => ({
  prefillTokens,
  prefillRequests,
  decodeRequests,
});

const report = (fields: Partial<EngineLoadReport>): EngineLoadReport => ({
  waitingRequests: 0,
  runningRequests: 0,
  observedAtMs: 0,
  ...fields,
});

Deno.test("reconcileLoad() uses our account alone when there is no usable report", () => {
  const result = reconcileLoad({ local: load(3000, 2, 5), meanUncachedTokens: 1000 });
  assert.equal(result.basis, "local");
  assert.equal(result.waitingPrefillTokens, 3000);
  assert.equal(result.runningRequests, 5);
});

Deno.test("reconcileLoad() adds others' pending tokens at the report to our live account", () => {
  // The engine saw 10 000 pending tokens, 4 000 of them ours; since then we sent 1 500 more.
  const result = reconcileLoad({
    local: load(5500, 3, 1),
    engine: {
      report: report({ waitingRequests: 3, runningRequests: 4, pendingPrefillTokens: 10_000 }),
      localAtObservation: load(4000, 2, 1),
    },
    meanUncachedTokens: 999,
  });
  assert.equal(result.basis, "engine_tokens");
  assert.equal(result.terms.othersPrefillTokens, 6000);
  assert.equal(result.waitingPrefillTokens, 6000 + 5500);
  // Engine: 7 active, ours 3 of them then; 1 of the 3 waiting was someone else's.
  assert.equal(result.terms.othersWaitingRequests, 1);
  assert.equal(result.terms.othersRunningRequests, 3);
  assert.equal(result.runningRequests, 3 + 1);
});

Deno.test("reconcileLoad() scales others' waiting count by the recent mean size when only counts exist", () => {
  const result = reconcileLoad({
    local: load(2000, 1),
    engine: {
      report: report({ waitingRequests: 4, runningRequests: 1 }),
      localAtObservation: load(2000, 1),
    },
    meanUncachedTokens: 1500,
  });
  assert.equal(result.basis, "engine_counts");
  assert.equal(result.terms.othersWaitingRequests, 3);
  assert.equal(result.waitingPrefillTokens, 3 * 1500 + 2000);
});

Deno.test("reconcileLoad() does not count our own prefilling request as someone else's decode", () => {
  // vLLM counts the request being prefilled as running: one request, ours, nothing else.
  const result = reconcileLoad({
    local: load(8000, 1),
    engine: {
      report: report({ waitingRequests: 0, runningRequests: 1 }),
      localAtObservation: load(8000, 1),
    },
    meanUncachedTokens: 8000,
  });
  assert.equal(result.runningRequests, 0);
  assert.equal(result.waitingPrefillTokens, 8000);
});

Deno.test("reconcileLoad() never goes below our own account when the engine lags behind us", () => {
  // Dispatched just before the poll, not yet queued by the engine when it answered.
  const result = reconcileLoad({
    local: load(6000, 2),
    engine: {
      report: report({ waitingRequests: 0, runningRequests: 0, pendingPrefillTokens: 0 }),
      localAtObservation: load(6000, 2),
    },
    meanUncachedTokens: 3000,
  });
  assert.equal(result.waitingPrefillTokens, 6000);
  assert.equal(result.terms.othersPrefillTokens, 0);
});

Deno.test("two routers sharing an engine agree within what each changed since its report", () => {
  const time = new ManualTime(0);
  const routerA = new LoadAccount({ now: time.now });
  const routerB = new LoadAccount({ now: time.now });
  routerA.lease("i", 3000);
  routerA.lease("i", 2000);
  const b1 = routerB.lease("i", 4000);
  const thirdParty = 1000;
  // One engine report, seen by both routers, with each router's own snapshot.
  const engineReport = report({
    waitingRequests: 4,
    runningRequests: 0,
    pendingPrefillTokens: 3000 + 2000 + 4000 + thirdParty,
  });
  const a0 = routerA.load("i");
  const b0 = routerB.load("i");
  const estimate = (account: LoadAccount, at: InstanceLoad) =>
    reconcileLoad({
      local: account.load("i"),
      engine: { report: engineReport, localAtObservation: at },
      meanUncachedTokens: 2500,
    }).waitingPrefillTokens;

  // At the report both see the whole engine, though each account alone sees only its share.
  assert.equal(routerA.load("i").prefillTokens, 5000);
  assert.equal(routerB.load("i").prefillTokens, 4000);
  assert.equal(estimate(routerA, a0), 10_000);
  assert.equal(estimate(routerB, b0), 10_000);

  // Then A dispatches 1 500 more and B's request gets its first token.
  routerA.lease("i", 1500);
  b1.firstToken();
  const truth = 10_000 + 1500 - 4000;
  const a = estimate(routerA, a0);
  const b = estimate(routerB, b0);
  const changedSinceReport = 1500 + 4000;
  assert.ok(Math.abs(a - b) <= changedSinceReport, `A ${a}, B ${b}`);
  // Each is off the truth by exactly the other router's change.
  assert.equal(a - truth, 4000);
  assert.equal(truth - b, 1500);

  // The next report brings them together again.
  const next = report({ waitingRequests: 4, runningRequests: 1, pendingPrefillTokens: truth });
  const again = [routerA, routerB].map((account) =>
    reconcileLoad({
      local: account.load("i"),
      engine: { report: next, localAtObservation: account.load("i") },
      meanUncachedTokens: 2500,
    }).waitingPrefillTokens
  );
  assert.deepEqual(again, [truth, truth]);
});

Deno.test("two routers reading the same count-only report agree when request sizes match the mean", () => {
  const mean = 2000;
  const reportOf = report({ waitingRequests: 5, runningRequests: 0 });
  const a = reconcileLoad({
    local: load(2 * mean, 2),
    engine: { report: reportOf, localAtObservation: load(2 * mean, 2) },
    meanUncachedTokens: mean,
  });
  const b = reconcileLoad({
    local: load(1 * mean, 1),
    engine: { report: reportOf, localAtObservation: load(1 * mean, 1) },
    meanUncachedTokens: mean,
  });
  assert.equal(a.waitingPrefillTokens, 5 * mean);
  assert.equal(b.waitingPrefillTokens, 5 * mean);
});

Deno.test("two routers polling one fake SGLang engine converge on its real queue", async () => {
  // timeScale 1: prefills take seconds, so the queue holds still while the routers poll.
  const engine = startFakeEngine({
    flavour: "sglang",
    timeScale: 1,
    countTokens: (body) => Number(body.user),
  });
  const routers = ["A", "B"].map(() => new LoadAccount({ now: () => performance.now() }));
  const leases: LoadLease[] = [];
  const requests: Promise<void>[] = [];
  try {
    const send = (router: number, tokens: number) => {
      leases.push(routers[router].lease("i", tokens));
      requests.push(
        fetch(`${engine.url}/v1/completions`, {
          method: "POST",
          body: JSON.stringify({ prompt: "x", user: String(tokens), max_tokens: 1 }),
        }).then((r) => r.body?.cancel()).catch(() => {}),
      );
    };
    send(0, 8000);
    send(0, 16_000);
    send(1, 12_000);
    await eventually(
      () => engine.load().prefilling === 1 && engine.load().waiting === 2,
      2_000,
      "one prompt prefilling and two queued",
    );
    const estimates: number[] = [];
    for (const account of routers) {
      const poller = new EngineLoadPoller({
        targets: () => [{ id: "i", url: engine.url, source: "sglang_get_load" }],
        fetch,
        now: () => performance.now(),
        timeoutMs: 500,
        staleAfterMs: 5000,
        localLoad: (id) => account.load(id),
      });
      await poller.pollOnce();
      const state = poller.state("i");
      assert.ok(state.usable, state.lastError);
      estimates.push(
        reconcileLoad({
          local: account.load("i"),
          engine: { report: state.report!, localAtObservation: state.localAtObservation },
          meanUncachedTokens: 1000,
        }).waitingPrefillTokens,
      );
    }
    const truth = engine.load().pendingPrefillTokens;
    assert.ok(truth > 30_000, `engine pending ${truth}`);
    // Our accounts know no progress inside the running prefill, the engine does: a few % at most.
    for (const estimate of estimates) {
      assert.ok(Math.abs(estimate - truth) / truth < 0.05, `estimate ${estimate} vs ${truth}`);
    }
    assert.ok(Math.abs(estimates[0] - estimates[1]) / truth < 0.02, `${estimates}`);
    assert.equal(routers[0].load("i").prefillTokens, 24_000, "A alone sees only its share");
  } finally {
    await engine.close();
    await Promise.all(requests);
    for (const lease of leases) lease.release();
  }
});

Deno.test("RecentPrefillSizes averages the latest dispatches and forgets old ones", () => {
  const sizes = new RecentPrefillSizes({ capacity: 3, maxAgeMs: 1000, fallbackTokens: 777 });
  assert.equal(sizes.mean(0), 777);
  sizes.record(100, 0);
  sizes.record(200, 100);
  assert.equal(sizes.mean(100), 150);
  sizes.record(300, 200);
  sizes.record(400, 300); // pushes out 100
  assert.equal(sizes.mean(300), 300);
  assert.equal(sizes.mean(1150), 350, "the one from t=100 is older than 1 s");
  assert.equal(sizes.mean(5000), 777);
});

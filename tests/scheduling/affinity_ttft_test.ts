import { assert, assertEquals } from "../assert.ts";
import {
  affinityTtft,
  clusterPrefillModel,
  homeTerm,
  queuePressure,
} from "../../src/scheduling/policies/affinity_ttft.ts";
import { mooncakeTtft } from "../../src/scheduling/policies/mooncake_ttft.ts";
import { choosePrefill } from "../../src/scheduling/prefill_choice.ts";
import { prefillTimeS } from "../../src/scheduling/prefill_model.ts";
import { estimateTtft } from "../../src/scheduling/ttft_estimate.ts";
import { heldPrefixTokens, homeOf } from "../../src/scheduling/prefix_home.ts";
import { resolveTtftParams } from "../../src/scheduling/registry.ts";
import type { Candidate, ScheduleRequest } from "../../src/scheduling/types.ts";
import { seededRandom } from "../../src/sim/rng.ts";

const TTFT = resolveTtftParams({});
const context = { random: () => 0.5, sequence: 0 };
const instance = (id: string, local: number, waitingRequests: number): Candidate => ({
  id,
  healthy: true,
  localPrefixTokens: local,
  waitingPrefillTokens: waitingRequests * 20_000,
  waitingPrefillRequests: waitingRequests,
  runningRequests: 0,
});
const doc: ScheduleRequest = { promptTokens: 20_100, poolPrefixTokens: 0 };

Deno.test("affinity_ttft keeps a document on its holder while mooncake_ttft moves it to a shorter queue", () => {
  // The holder has one 20k-token prefill queued (~2.6 s); elsewhere the document is recomputed
  // (~2.6 s) on an idle instance: about even for this request, a lost copy for the cluster.
  const candidates = [instance("holder", 20_000, 1), instance("idle", 0, 0)];
  assertEquals(mooncakeTtft(TTFT).select(doc, candidates, context).ranking[0], "idle");
  const decision = affinityTtft(TTFT).select(doc, candidates, context);
  assertEquals(decision.ranking[0], "holder");
  const idle = decision.scores.find((s) => s.id === "idle")!;
  assert(idle.terms.duplicationS > 2, JSON.stringify(idle.terms));
  assertEquals(idle.detail?.duplicatedTokens, 20_000);
});

Deno.test("affinity_ttft moves a document off a holder overloaded past the cost of the copy", () => {
  // Without a pool a copy costs 8 × its recompute (~21 s): ten queued prefills (~26 s) are more.
  const candidates = [instance("holder", 20_000, 10), instance("idle", 0, 0)];
  assertEquals(affinityTtft(TTFT).select(doc, candidates, context).ranking[0], "idle");
  // A heavier duplication weight holds on longer.
  const sticky = affinityTtft(TTFT, { duplicationWeight: 16 }).select(doc, candidates, context);
  assertEquals(sticky.ranking[0], "holder");
});

Deno.test("affinity_ttft places a prefix nobody holds by TTFT alone (no duplication to pay)", () => {
  const candidates = [instance("busy", 0, 2), instance("idle", 0, 0)];
  const decision = affinityTtft(TTFT).select(doc, candidates, context);
  assertEquals(decision.ranking[0], "idle");
  assert(decision.scores.every((s) => s.terms.duplicationS === 0));
});

Deno.test("affinity_ttft: a copy loaded from the pool is fast for the request but takes cache all the same", () => {
  const pooled: ScheduleRequest = { promptTokens: 20_100, poolPrefixTokens: 20_000 };
  const candidates = [instance("holder", 20_000, 1), instance("idle", 0, 0)];
  assertEquals(mooncakeTtft(TTFT).select(pooled, candidates, context).ranking[0], "idle");
  const dear = affinityTtft(TTFT, { poolDuplicationWeight: 4 }).select(pooled, candidates, context);
  assertEquals(dear.ranking[0], "holder");
  const idle = dear.scores.find((s) => s.id === "idle")!;
  assertEquals(idle.transferTokens, 20_000);
  assertEquals(idle.detail?.duplicatedTokens, 20_000);
  assert(idle.terms.duplicationS > 2, JSON.stringify(idle.terms));
  const free = affinityTtft(TTFT, { poolDuplicationWeight: 0 }).select(pooled, candidates, context);
  assertEquals(free.ranking[0], "idle", "weight 0 is mooncake_ttft");
});

/**
 * The property: the chosen placement is never dominated. No other healthy candidate is at least
 * as good on predicted TTFT, duplicated (evicting) held tokens and being the new part's home, and
 * strictly better on one: a placement that evicts more than it saves is never taken when an
 * equal alternative exists, and a new prefix leaves its home only for a faster start.
 */
Deno.test("property: affinity_ttft never takes a placement that another beats on TTFT, duplication and home", () => {
  for (let seed = 1; seed <= 2_000; seed++) {
    const random = seededRandom(seed);
    const promptTokens = 1 + Math.floor(random() * 40_000);
    const request = {
      promptTokens,
      poolPrefixTokens: random() < 0.5 ? 0 : Math.floor(random() * promptTokens),
      ...(random() < 0.5 ? { homeKey: Math.floor(random() * 1e6) } : {}),
    };
    const candidates = Array.from({ length: 2 + Math.floor(random() * 6) }, (_, i) =>
      ({
        ...instance(`i${i}`, random() < 0.4 ? 0 : Math.floor(random() * promptTokens), 0),
        waitingPrefillTokens: Math.floor(random() * 3) * 8192,
        waitingPrefillRequests: Math.floor(random() * 3),
        healthy: random() > 0.15,
      }) as Candidate);
    if (!candidates.some((c) => c.healthy)) continue;
    const options = { duplicationWeight: random() * 4, homeWeight: random() * 8 };
    const decision = affinityTtft(TTFT, options).select(request, candidates, context);
    const held = heldPrefixTokens(request, candidates);
    const home = request.homeKey === undefined ? undefined : homeOf(request.homeKey, candidates);
    const measure = (c: Candidate) => {
      const estimate = estimateTtft(request, c, TTFT);
      const local = estimate.reusedTokens - estimate.transferTokens;
      return [estimate.totalS, Math.max(0, held - local), c.id === home ? 0 : 1];
    };
    const chosen = measure(candidates.find((c) => c.id === decision.ranking[0])!);
    for (const other of candidates.filter((c) => c.healthy)) {
      const alt = measure(other);
      const noWorse = alt.every((value, i) => value <= chosen[i]);
      const better = alt.some((value, i) => value < chosen[i] - (i === 0 ? 1e-9 : 0));
      assert(!(noWorse && better), `seed ${seed}: ${other.id} beats ${decision.ranking[0]}`);
    }
  }
});

Deno.test("affinity_ttft: near saturation a new prefix goes home past a slightly shorter queue", () => {
  const request = { ...doc, homeKey: "doc-7" };
  const ids = ["a", "b", "c", "d"];
  const home = homeOf("doc-7", ids.map((id) => instance(id, 0, 0)))!;
  // Every instance has a queue; home's is one prefill longer than the shortest.
  const busy = ids.map((id) => instance(id, 0, id === home ? 4 : 3));
  assertEquals(mooncakeTtft(TTFT).select(request, busy, context).ranking[0] !== home, true);
  const decision = affinityTtft(TTFT).select(request, busy, context);
  assertEquals(decision.ranking[0], home);
  const away = decision.scores.find((s) => s.id !== home)!;
  assert(away.terms.homeS > 0, JSON.stringify(away.terms));
  assertEquals(decision.scores.find((s) => s.id === home)!.detail?.home, 1);
  // Overloaded far past the others, home is passed over.
  const overloaded = ids.map((id) => instance(id, 0, id === home ? 30 : 3));
  assert(affinityTtft(TTFT).select(request, overloaded, context).ranking[0] !== home);
  // Weight 0 turns the term off: the shortest queue wins again.
  const off = affinityTtft(TTFT, { homeWeight: 0 }).select(request, busy, context);
  assert(off.ranking[0] !== home);
});

Deno.test("homeTerm: off home costs weight × pressure³ × the unheld part's compute time", () => {
  const request = { ...doc, homeKey: "k" };
  const busy = ["a", "b"].map((id) => instance(id, 0, 2));
  const pressure = queuePressure(busy, doc.promptTokens, TTFT);
  assert(pressure > 0.3 && pressure < 1, `pressure ${pressure}`);
  const term = homeTerm(request, busy, 0, TTFT, 4);
  assertEquals(term.id, homeOf("k", busy));
  const expected = 4 * pressure ** 3 * prefillTimeS(TTFT.prefillModel, doc.promptTokens);
  assert(Math.abs(term.offHomeS - expected) < 1e-12, `${term.offHomeS} vs ${expected}`);
  assertEquals(homeTerm({ ...doc }, busy, 0, TTFT, 4), { offHomeS: 0 }, "no key, no home");
  assertEquals(homeTerm(request, busy, 0, TTFT, 0), { offHomeS: 0 }, "weight 0: off");
});

Deno.test("affinity_ttft: on an idle cluster the home term costs nothing and breaks ties", () => {
  const request = { ...doc, homeKey: 12345 };
  const idle = ["a", "b", "c"].map((id) => instance(id, 0, 0));
  const decision = affinityTtft(TTFT).select(request, idle, context);
  assert(decision.scores.every((s) => s.terms.homeS === 0));
  assertEquals(decision.ranking[0], homeOf(12345, idle));
  // A held prefix is placed by its holder, not by the home of the part after it.
  const held = [instance("a", 20_000, 0), instance("b", 0, 0), instance("c", 0, 0)];
  assertEquals(affinityTtft(TTFT).select(request, held, context).ranking[0], "a");
});

Deno.test("affinity_ttft: with the pool, an idle cluster spreads a hot prefix and a busy one keeps it", () => {
  const pooled: ScheduleRequest = { promptTokens: 20_100, poolPrefixTokens: 20_000 };
  // The holder has one prefill queued: on an otherwise idle cluster a transfer to an idle
  // instance is worth it.
  const idle = [instance("holder", 20_000, 1), instance("other", 0, 0), instance("third", 0, 0)];
  assertEquals(affinityTtft(TTFT).select(pooled, idle, context).ranking[0] !== "holder", true);
  // Every instance has prefills queued: the cluster is busy, a copy's cache churn would feed it.
  const busy = [instance("holder", 20_000, 3), instance("other", 0, 2), instance("third", 0, 2)];
  assertEquals(affinityTtft(TTFT).select(pooled, busy, context).ranking[0], "holder");
  assert(queuePressure(busy, 20_000, TTFT) > queuePressure(idle, 20_000, TTFT));
  assertEquals(queuePressure([instance("a", 0, 0)], 20_000, TTFT), 0);
});

Deno.test("affinity_ttft with localPressureWeight: a copy to an idle instance costs that weight, to a busy one up to duplicationWeight", () => {
  const copyS = prefillTimeS(TTFT.prefillModel, 20_000);
  const options = { localPressureWeight: 1 };
  // The holder has three prefills queued (~7.9 s): the flat weight (8 × ~2.6 s) keeps the
  // document there; an idle instance, priced at 1 × the recompute, takes it.
  const idle = [instance("holder", 20_000, 3), instance("idle", 0, 0)];
  assertEquals(affinityTtft(TTFT).select(doc, idle, context).ranking[0], "holder");
  const spreading = affinityTtft(TTFT, options).select(doc, idle, context);
  assertEquals(spreading.ranking[0], "idle");
  const idleTerms = spreading.scores.find((s) => s.id === "idle")!.terms;
  assert(Math.abs(idleTerms.duplicationS - copyS) < 1e-9, JSON.stringify(idleTerms));
  // The other instance is as busy as a copy is long: its weight doubles, and the holder keeps it.
  const busy = [instance("holder", 20_000, 3), instance("busy", 0, 1)];
  const keeping = affinityTtft(TTFT, options).select(doc, busy, context);
  assertEquals(keeping.ranking[0], "holder");
  const busyTerms = keeping.scores.find((s) => s.id === "busy")!.terms;
  const pressure = busyTerms.queueS / (busyTerms.queueS + copyS);
  assert(Math.abs(busyTerms.duplicationS - copyS / (1 - pressure)) < 1e-9);
  // Never past duplicationWeight, however busy.
  const swamped = [instance("holder", 20_000, 3), instance("swamped", 0, 50)];
  const capped = affinityTtft(TTFT, options).select(doc, swamped, context);
  const swampedTerms = capped.scores.find((s) => s.id === "swamped")!.terms;
  assert(Math.abs(swampedTerms.duplicationS - 8 * copyS) < 1e-9);
});

Deno.test("affinity_ttft: where engines cannot load from the pool (the router's view), a pooled prefix is as sticky as a local one", () => {
  const pooled: ScheduleRequest = { promptTokens: 20_100, poolPrefixTokens: 20_000 };
  const candidates = [
    instance("holder", 20_000, 1),
    instance("other", 0, 0),
    instance("third", 0, 0),
  ];
  assert(affinityTtft(TTFT).select(pooled, candidates, context).ranking[0] !== "holder");
  const local = { ...pooled, poolLoads: false };
  assertEquals(affinityTtft(TTFT).select(local, candidates, context).ranking[0], "holder");
  // The router's planning step says so: its engines read only what they hold.
  const choice = choosePrefill(pooled, candidates, affinityTtft(TTFT), context, {
    ttft: TTFT,
    poolUse: "never",
  });
  assertEquals(choice.chosen?.id, "holder");
});

Deno.test("clusterPrefillModel: the mean of the healthy instances' learned models, else the prior", () => {
  const prior = TTFT.prefillModel;
  assertEquals(clusterPrefillModel([instance("a", 0, 0)], prior), prior);
  const slow = { linear: 0.8, quadratic: 0.002, cachedLinear: 0.01, constant: 0.5 };
  const fast = { linear: 0.4, quadratic: 0.001, constant: 0.1 };
  const candidates = [
    { ...instance("a", 0, 0), prefillModel: slow },
    { ...instance("b", 0, 0), prefillModel: fast },
    { ...instance("c", 0, 0), prefillModel: { linear: 99, quadratic: 99 }, healthy: false },
    instance("d", 0, 0),
  ];
  const mean = clusterPrefillModel(candidates, prior);
  assertEquals(mean.linear.toFixed(3), "0.600");
  assertEquals(mean.quadratic.toFixed(4), "0.0015");
  assertEquals(mean.cachedLinear?.toFixed(3), "0.005");
  assertEquals(mean.constant?.toFixed(2), "0.30");
});

Deno.test("affinity_ttft prices the queue with the cluster's learned model: a slow (CPU) cluster's queue counts", () => {
  // Four warm requests queued on the holder: nothing on the GPU prior, seconds on slow engines
  // with a fixed cost per request. A 2k-token document: moving it costs 8 × its recompute.
  const request = { promptTokens: 2_100, poolPrefixTokens: 0 };
  const queued = (id: string, local: number, n: number): Candidate => ({
    ...instance(id, local, 0),
    waitingPrefillTokens: n * 100,
    waitingPrefillRequests: n,
  });
  const gpu = [queued("holder", 2_000, 40), queued("idle", 0, 0)];
  assertEquals(affinityTtft(TTFT).select(request, gpu, context).ranking[0], "holder");
  const cpu = { linear: 0.7, quadratic: 0.002, constant: 0.6 };
  const slow = gpu.map((c) => ({ ...c, prefillModel: cpu }));
  assertEquals(affinityTtft(TTFT).select(request, slow, context).ranking[0], "idle");
});

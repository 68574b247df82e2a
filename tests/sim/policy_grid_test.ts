import { assert, assertEquals } from "../assert.ts";
import {
  defaultGrid,
  judge,
  noCacheCapacityRps,
  type PolicyCell,
  runCell,
} from "../../src/sim/policy_grid.ts";

const cell = {
  name: "c",
  workload: "docs:documents=20,documentTokens=4096",
  cacheFraction: 0.25,
  load: 1,
  pool: "off" as const,
};
const at = (meanTtftS: number, p99TtftS = meanTtftS * 3): PolicyCell => ({
  meanTtftS,
  p99TtftS,
  hitRatio: 0.5,
});

const floorAt1 = { meanTtftS: 1, hitRatio: 0.5 };

Deno.test("judge: past 15% above the floor the candidate must be 10% faster than the best peer, else within 2%", () => {
  const options = { peers: ["p1", "p2"], candidate: "ours" };
  const loaded = { p1: at(2), p2: at(1.5), ours: at(1.34) };
  const verdict = judge(cell, floorAt1, loaded, options);
  assertEquals(verdict.bestPeer, "p2");
  assert(verdict.meanMet && verdict.p99Met);
  assertEquals(judge(cell, floorAt1, { ...loaded, ours: at(1.4) }, options).meanMet, false);
  // The best peer within 15% of the floor: the candidate needs only to be within 2% of it.
  const easy = { p1: at(1.1), p2: at(1.2), ours: at(1.12) };
  assertEquals(judge(cell, floorAt1, easy, options).meanMet, true);
  assertEquals(judge(cell, floorAt1, { ...easy, ours: at(1.13) }, options).meanMet, false);
  assertEquals(judge(cell, floorAt1, { ...loaded, ours: at(1.3, 99) }, options).p99Met, false);
});

Deno.test("the no-cache capacity is the rate that keeps the instances busy recomputing every prompt", () => {
  const trace = [{ timestampMs: 0, inputLength: 20_000, outputLength: 1, hashIds: [] }];
  // 20k tokens: 0.1157 × 20 + 0.000775 × 400 = 2.624 s on each of 8 instances.
  assertEquals(noCacheCapacityRps(trace, 8).toFixed(3), (8 / 2.624).toFixed(3));
});

Deno.test("a grid cell averages each policy over the seeds and puts a floor under them", () => {
  const result = runCell(cell, {
    cells: [cell],
    seeds: [1, 2],
    policies: ["round_robin", "kv_hit_len"],
    peers: ["round_robin"],
    candidate: "kv_hit_len",
    instances: 4,
    requests: 300,
  });
  const { round_robin: rr, kv_hit_len: kv } = result.policies;
  assert(kv.hitRatio > rr.hitRatio, `${kv.hitRatio} vs ${rr.hitRatio}`);
  assert(result.floorS > 0 && result.floorS <= Math.min(rr.meanTtftS, kv.meanTtftS));
  // The floor is kv_hit_len's idle run (round robin spreads every document): its hits with it.
  assert(result.floorHitRatio > rr.hitRatio, `${result.floorHitRatio} vs ${rr.hitRatio}`);
  assertEquals(result.bestPeer, "round_robin");
});

Deno.test("a grid cell runs a policy spec with its parameters", () => {
  // Sticky past any queue against copies as soon as they pay: the parameter must reach the policy.
  const [sticky, spreading] = [
    "affinity_ttft:duplicationWeight=1000&homeWeight=0",
    "affinity_ttft:duplicationWeight=0&homeWeight=0",
  ];
  const result = runCell({ ...cell, load: 2 }, {
    cells: [cell],
    seeds: [1],
    policies: [sticky, spreading],
    peers: [spreading],
    candidate: sticky,
    instances: 4,
    requests: 300,
  });
  const [a, b] = [result.policies[sticky], result.policies[spreading]];
  assert(a.hitRatio > b.hitRatio, `${a.hitRatio} vs ${b.hitRatio}`);
});

Deno.test("a held candidate is judged against the same floor as one placing on arrival", () => {
  const options = {
    cells: [cell],
    seeds: [1],
    policies: ["round_robin", "kv_hit_len"],
    peers: ["round_robin"],
    candidate: "kv_hit_len",
    instances: 4,
    requests: 300,
  };
  const loaded = { ...cell, load: 2 };
  const placed = runCell(loaded, options);
  const held = runCell(loaded, { ...options, candidateHoldAboveTokens: 0 });
  assertEquals(held.floorS, placed.floorS);
  assertEquals(held.policies.round_robin, placed.policies.round_robin);
  assert(held.policies.kv_hit_len.meanTtftS !== placed.policies.kv_hit_len.meanTtftS, "held");
});

Deno.test("a grid's engine step cost reaches every run of the cell, and slows it", () => {
  const options = {
    cells: [cell],
    seeds: [1],
    policies: ["round_robin"],
    peers: ["round_robin"],
    candidate: "round_robin",
    instances: 4,
    requests: 300,
  };
  const free = runCell(cell, options);
  const stepped = runCell(cell, { ...options, engineStepS: 0.05 });
  assert(stepped.floorS > free.floorS, "the floor pays the steps too");
  assert(stepped.policies.round_robin.meanTtftS > free.policies.round_robin.meanTtftS);
});

Deno.test("the default grid covers every axis of the targets, with and without the pool", () => {
  const cells = defaultGrid(false);
  const values = (f: (c: typeof cells[number]) => unknown) => new Set(cells.map(f)).size;
  assertEquals(values((c) => c.pool), 2);
  assertEquals(values((c) => c.load), 3);
  assertEquals(values((c) => c.cacheFraction), 3);
  assert(cells.some((c) => c.workload === "trace"));
  assert(
    cells.some((c) => c.workload.includes("zipf=0.8")) &&
      cells.some((c) => c.workload.includes("zipf=1.4")),
  );
});

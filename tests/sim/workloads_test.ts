import { assert, assertEquals, assertThrows } from "../assert.ts";
import { generateWorkload, parseWorkloadSpec, zipfSampler } from "../../src/sim/workloads.ts";
import { seededRandom } from "../../src/sim/rng.ts";

Deno.test("a workload is the same for the same spec and seed, and another for another seed", () => {
  const spec = parseWorkloadSpec("docs:requests=300,documents=50");
  const a = generateWorkload(spec, 1), b = generateWorkload(spec, 1), c = generateWorkload(spec, 2);
  assertEquals(a, b);
  assert(JSON.stringify(a) !== JSON.stringify(c));
  assertEquals(a.length, 300);
  assert(a.every((r, i) => i === 0 || a[i - 1].timestampMs <= r.timestampMs), "by arrival");
});

Deno.test("docs: requests for one document share its blocks; each question's blocks are its own", () => {
  const trace = generateWorkload(
    parseWorkloadSpec("docs:requests=400,documents=20,documentTokens=2048,questionTokens=100"),
    7,
  );
  const byDoc = new Map<number, number[][]>();
  for (const r of trace) {
    assertEquals(r.inputLength, 2148);
    assertEquals(r.hashIds.length, Math.ceil(2148 / 512));
    const first = r.hashIds[0];
    byDoc.set(first, [...(byDoc.get(first) ?? []), r.hashIds]);
  }
  assert(byDoc.size <= 20);
  for (const requests of byDoc.values()) {
    for (const ids of requests) assertEquals(ids.slice(0, 4), requests[0].slice(0, 4));
  }
  const tails = trace.map((r) => r.hashIds[4]);
  assertEquals(new Set(tails).size, trace.length, "every question's block is new");
});

Deno.test("docs: popularity follows the Zipf exponent (0: uniform, 1.2: the first document dominates)", () => {
  const counts = (s: number) => {
    const draw = zipfSampler(100, s, seededRandom(3));
    const n = new Array(100).fill(0);
    for (let i = 0; i < 20_000; i++) n[draw()]++;
    return n;
  };
  const uniform = counts(0), skewed = counts(1.2);
  assert(Math.max(...uniform) < 2.5 * Math.min(...uniform), `${Math.max(...uniform)}`);
  // P(0) = 1 / H(100, 1.2) ≈ 0.26; P(99) ≈ 0.0011.
  assert(skewed[0] > 4_500 && skewed[0] < 5_900, `${skewed[0]}`);
  assert(skewed[99] < 60, `${skewed[99]}`);
});

Deno.test("chat and agents: a session's turns extend its own prefix; agents share system prompts", () => {
  const chat = generateWorkload(
    parseWorkloadSpec("chat:requests=60,turns=3,turnTokens=600,outputTokens=100,gapS=1"),
    1,
  );
  assertEquals(chat.length, 60);
  // Turn lengths: 600, 1300, 2000 tokens; a later turn starts with an earlier one's full blocks.
  const starts = new Map<number, number[][]>();
  for (const r of chat) starts.set(r.hashIds[0], [...(starts.get(r.hashIds[0]) ?? []), r.hashIds]);
  const session = [...starts.values()].find((turns) => turns.length === 3)!;
  assert(session, "a session with all three turns");
  const [t1, t2, t3] = session.sort((a, b) => a.length - b.length);
  assertEquals([t1.length, t2.length, t3.length], [2, 3, 4]);
  assertEquals(t2[0], t1[0]);
  assertEquals(t3.slice(0, 2), t2.slice(0, 2));

  const agents = generateWorkload(
    parseWorkloadSpec("agents:requests=200,systemPrompts=2,systemTokens=4096"),
    1,
  );
  const systems = new Set(agents.map((r) => r.hashIds.slice(0, 8).join()));
  assertEquals(systems.size, 2, "every request starts with one of the two system prompts");
});

Deno.test("bursts: arrivals come faster inside a burst than outside", () => {
  const trace = generateWorkload(
    parseWorkloadSpec("docs:requests=3000,rps=2,burstFactor=5,burstEveryS=60,burstS=10"),
    5,
  );
  const inBurst = trace.filter((r) => (r.timestampMs / 1000) % 60 < 10).length;
  const rate = (n: number, seconds: number) => n / seconds;
  const spanS = trace.at(-1)!.timestampMs / 1000;
  const burstRate = rate(inBurst, spanS / 6),
    calmRate = rate(trace.length - inBurst, spanS * 5 / 6);
  assert(
    burstRate > 3.5 * calmRate,
    `burst ${burstRate.toFixed(2)}/s, calm ${calmRate.toFixed(2)}/s`,
  );
});

Deno.test("a workload spec names its bad key or value and the keys it takes", () => {
  assertThrows(() => parseWorkloadSpec("zipf"), Error, 'Unknown workload "zipf"');
  assertThrows(() => parseWorkloadSpec("docs:docs=3"), Error, 'has no "docs": its keys are');
  assertThrows(() => parseWorkloadSpec("docs:zipf=-1"), Error, "zipf must be a number >= 0");
  assertThrows(() => parseWorkloadSpec("docs:rps=0"), Error, "rps must be > 0");
});

/**
 * How long one scheduling decision takes: every policy picks among 64 healthy candidates (assorted
 * prefixes and loads, many ties). The claim: well under a millisecond per decision on average.
 * The unit tests (tests/scheduling/policy_contract_test.ts) check what the decisions are; this
 * says how fast they come:
 *
 *     deno bench tests/bench/policy_decision_bench.ts
 */
import { createPolicy, POLICY_NAMES } from "../../src/scheduling/registry.ts";
import type { Candidate, ScheduleRequest } from "../../src/scheduling/types.ts";
import { seededRandom } from "../../src/sim/rng.ts";

const random = seededRandom(9);
const promptTokens = 1 + Math.floor(random() * 40_000);
const poolPrefixTokens = Math.floor(random() * promptTokens);
// A home key as the router sets it (a store key's digest), so affinity_ttft's home term is timed.
const homeKey = "a3b1c2d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";
const request: ScheduleRequest = { promptTokens, poolPrefixTokens, homeKey };
const candidates = Array.from({ length: 64 }, (_, i): Candidate => ({
  id: `i${i}`,
  healthy: true,
  localPrefixTokens: random() < 0.5 ? 0 : Math.floor(random() * poolPrefixTokens),
  waitingPrefillTokens: Math.floor(random() * 4) * 8192,
  waitingPrefillRequests: Math.floor(random() * 4),
  runningRequests: Math.floor(random() * 3),
}));

for (const name of POLICY_NAMES) {
  const policy = createPolicy(name);
  let sequence = 0;
  Deno.bench({ name: `${name}: 64 candidates`, group: "decision" }, () => {
    sequence++;
    policy.select(request, candidates, { random: seededRandom(sequence), sequence });
  });
}

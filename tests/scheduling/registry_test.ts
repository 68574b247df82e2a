/**
 * The open policy registry: each policy takes its own parameters and the TTFT model's, and says
 * which when given another; a library user registers a policy (here one composed of the shared
 * scorers) and configures it by name like a built-in one.
 */
import { assert, assertEquals, assertThrows } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { policyFactory } from "../../src/scheduling/policy_factory.ts";
import { buildDecision } from "../../src/scheduling/policies/rank.ts";
import {
  createPolicy,
  paramsFor,
  policyNames,
  policyParamKeys,
  registerPolicy,
} from "../../src/scheduling/registry.ts";
import { prefixMatchRate, requestLoad } from "../../src/scheduling/scorers.ts";
import type { Candidate } from "../../src/scheduling/types.ts";
import { z } from "zod";

const candidate = (id: string, hit: number, running: number): Candidate => ({
  id,
  healthy: true,
  localPrefixTokens: hit,
  waitingPrefillTokens: 0,
  runningRequests: running,
});

Deno.test("a policy refuses a parameter it does not take and names those it does", () => {
  const error = assertThrows(() => createPolicy("cache_aware", { queueWeight: 2 }));
  assert(error.message.includes('takes no parameter "queueWeight"'), error.message);
  assert(error.message.includes("loadFilterTokens"), error.message);
  assert(error.message.includes("kvBytesPerToken"), `and the TTFT model's: ${error.message}`);
  assertThrows(() => createPolicy("llmd_default", { queueWeight: -1 }));
  assertEquals(
    createPolicy("llmd_default", { queueWeight: 1, kvBytesPerToken: 2 }).name,
    "llmd_default",
  );
  assertEquals(policyParamKeys("sglang_cache_aware").slice(0, 3), [
    "cacheThreshold",
    "balanceAbsThreshold",
    "balanceRelThreshold",
  ]);
  assertEquals(paramsFor("least_load", { loadFilterTokens: 9, kvBytesPerToken: 1 }), {
    kvBytesPerToken: 1,
  });
});

Deno.test("the config says which keys a policy accepts", () => {
  const model = {
    name: "m",
    tokenizer: { mode: "none" },
    kv: { store: "none" },
    policy: { name: "dynamo_kv", params: { overlapWeight: 2 } },
    instances: [{ id: "a", url: "http://127.0.0.1:9" }],
  };
  const error = assertThrows(() => resolveConfig({ models: [model] }));
  assert(error.message.includes("models[0].policy"), error.message);
  assert(error.message.includes('takes no parameter "overlapWeight"'), error.message);
  assert(error.message.includes("overlapScoreWeight"), error.message);
});

Deno.test("a registered policy composed of the shared scorers is built and configured by name", () => {
  registerPolicy(policyFactory({
    name: "match_then_load_test",
    summary: "the best prefix match, less load on ties",
    params: z.strictObject({ matchWeight: z.number().min(0).optional() }),
    create: ({ matchWeight = 1 }) => ({
      name: "match_then_load_test",
      select: (request, candidates) =>
        buildDecision("match_then_load_test", candidates, (c) => ({
          terms: { match: -matchWeight * prefixMatchRate(request.promptTokens, c) },
          tieBreaks: [requestLoad(c)],
        })),
    }),
  }));
  assert(policyNames().includes("match_then_load_test"));
  assertThrows(() =>
    registerPolicy(policyFactory({ ...createFactoryStub(), name: "cache_aware" }))
  );
  const policy = createPolicy("match_then_load_test", { matchWeight: 2 });
  const decision = policy.select({ promptTokens: 100, poolPrefixTokens: 0 }, [
    candidate("a", 50, 3),
    candidate("b", 80, 9),
    candidate("c", 80, 1),
  ], { random: Math.random, sequence: 0 });
  assertEquals(decision.ranking, ["c", "b", "a"]);
  const config = resolveConfig({
    models: [{
      name: "m",
      tokenizer: { mode: "none" },
      kv: { store: "none" },
      policy: { name: "match_then_load_test", params: { matchWeight: 3 } },
      instances: [{ id: "a", url: "http://127.0.0.1:9" }],
    }],
  });
  assertEquals(config.models[0].policy, {
    name: "match_then_load_test",
    params: { matchWeight: 3 },
  });
});

function createFactoryStub() {
  return {
    name: "stub",
    summary: "",
    params: z.strictObject({}),
    create: () => createPolicy("random"),
  };
}

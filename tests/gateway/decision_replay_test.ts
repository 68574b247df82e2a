import { assert, assertEquals, assertThrows } from "../assert.ts";
import { runDemoBurst } from "../../cli/demo.ts";
import { createRouter } from "../../routes/app.ts";
import { startDemoCluster } from "../../src/fakes/demo_cluster.ts";
import { buildPolicy } from "../../src/scheduling/named_policy.ts";
import { POLICY_NAMES } from "../../src/scheduling/registry.ts";
import { replayDecision } from "../../src/scheduling/decision_replay.ts";

/**
 * The demo's router with every policy as an arm of one experiment, so one burst tries them all;
 * `poolLoads`: its engines load from the store by themselves (`kv.poolLoads`).
 */
function everyPolicy(config: Record<string, unknown>, poolLoads: boolean): Record<string, unknown> {
  const [model] = config.models as Record<string, unknown>[];
  const arms = POLICY_NAMES.map((policy) => ({ name: policy, policy }));
  const kv = { ...model.kv as Record<string, unknown>, poolLoads };
  return { ...config, models: [{ ...model, kv, experiment: { key: "random", arms } }] };
}

// Random policies included: the logged draws make each decision replayable.
Deno.test("a replayed decision log gives the same decisions, for every policy", async () => {
  await replaysEveryPolicy(false);
});

Deno.test("with kv.poolLoads a replayed decision log gives the same decisions too", async () => {
  await replaysEveryPolicy(true);
});

async function replaysEveryPolicy(poolLoads: boolean): Promise<void> {
  const cluster = await startDemoCluster({ engines: 3 });
  const router = await createRouter(everyPolicy(cluster.routerConfig(), poolLoads), {
    log: () => {},
  });
  try {
    assert(await router.warm(), "worker threads loaded");
    const { port } = await router.serve({ port: 0 });
    const results = await runDemoBurst(`http://127.0.0.1:${port}`, cluster.model, 4, 6);
    assert(results.every((r) => r.status === 200));
    const logged = router.decisions.recent(100).reverse();
    assertEquals(logged.length, results.length);
    assert(logged.some((e) => e.candidates.some((c) => c.localPrefixTokens > 0)), "hits seen");
    const model = router.config.models[0];
    for (const entry of logged) {
      const replayed = buildPolicy(entry.policy, model);
      const choice = replayDecision(entry.inputs, replayed.policy, replayed.ttftParams);
      assertEquals(choice.decision.policy, entry.policy);
      assertEquals(
        choice.decision.ranking,
        entry.candidates.filter((c) => !c.excluded && c.healthy).map((c) => c.id),
        `request ${entry.requestId} (${entry.policy})`,
      );
      assertEquals(choice.chosen?.id, entry.chosen);
      assertEquals(choice.predictedTtftS ?? null, entry.predictedTtftS);
    }
    assert(new Set(logged.map((e) => e.policy)).size >= 5, "several policies decided");
    assertEquals(
      logged.every((e) => e.inputs.poolUse === (poolLoads ? "always" : undefined)),
      true,
    );
  } finally {
    await router.close();
    await cluster.close();
  }
}

Deno.test("a replay that needs more random draws than were logged says so instead of guessing", async () => {
  const cluster = await startDemoCluster({ engines: 2 });
  const router = await createRouter(cluster.routerConfig({ policy: "random" }), { log: () => {} });
  try {
    assert(await router.warm(), "worker threads loaded");
    const { port } = await router.serve({ port: 0 });
    await runDemoBurst(`http://127.0.0.1:${port}`, cluster.model, 1, 0);
    const [entry] = router.decisions.recent(1);
    assert(entry.inputs.draws.length > 0, "random drew");
    const model = router.config.models[0];
    const replayed = buildPolicy(model.policy, model);
    assertThrows(
      () => replayDecision({ ...entry.inputs, draws: [] }, replayed.policy, replayed.ttftParams),
      Error,
      "the replay asked for draw 1 of 0 recorded",
    );
  } finally {
    await router.close();
    await cluster.close();
  }
});

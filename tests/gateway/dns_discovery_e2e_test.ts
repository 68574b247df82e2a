import { assert, assertEquals } from "../assert.ts";
import type { ResolveDns } from "../../src/cluster/dns_discovery.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { createRouter } from "../../routes/app.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { completion, loadOnlyModel, range, startRouter } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";

const MODEL = "dns-model";

Deno.test("a model given as a DNS name gets its instances from the resolver, and a reload drops the group", async () => {
  // Every fake engine listens on 127.0.0.1, so the "addresses" are loopback aliases and each
  // group uses the port of its own engine.
  const engines = [0, 1].map((i) =>
    startFakeEngine({ id: `e${i}`, model: MODEL, timeScale: 0.001 })
  );
  const answers: Record<string, string[]> = {
    "A pool-a.svc": ["127.0.0.1"],
    "A pool-b.svc": ["127.0.0.1"],
  };
  let failedLookups = 0;
  const resolveDns: ResolveDns = (query, type) => {
    const answer = answers[`${type} ${query}`];
    if (!answer) failedLookups++;
    return answer ? Promise.resolve(answer) : Promise.reject(new Error(`NXDOMAIN ${query}`));
  };
  const model = (discovery: unknown[]) =>
    loadOnlyModel(MODEL, { health: { intervalMs: 5_000, timeoutMs: 300 }, discovery });
  const groupA = { name: "a", hostname: "pool-a.svc", port: engines[0].port, intervalMs: 100 };
  const groupB = { name: "b", hostname: "pool-b.svc", port: engines[1].port, intervalMs: 100 };
  const { router, url } = await startRouter([model([groupA, groupB])], { resolveDns });
  const cluster = router.registry.runtime(MODEL)!.cluster;
  const ids = () => cluster.entries().map((e) => e.config.id).sort();
  const idA = `a-127.0.0.1:${engines[0].port}`;
  const idB = `b-127.0.0.1:${engines[1].port}`;
  try {
    await eventually(
      () => cluster.entries().filter((e) => cluster.isHealthy(e)).length === 2,
      2_000,
      "both discovered instances to pass /health",
    );
    assertEquals(ids(), [idA, idB]);
    assertEquals(cluster.get(idA)!.origin, "discovery");
    assertEquals(cluster.get(idA)!.config.kvHost, "127.0.0.1");
    const response = await completion(url, { model: MODEL, prompt: range(1, 16), max_tokens: 2 });
    assertEquals(response.status, 200);
    assert([idA, idB].includes(response.headers.get("x-tidegate-instance")!));
    await response.body?.cancel();

    // The resolver failing keeps the last answer.
    delete answers["A pool-b.svc"];
    await eventually(() => failedLookups >= 2, 2_000, "two failed lookups of group b");
    assertEquals(ids(), [idA, idB]);

    const breakerA = cluster.get(idA)!.breaker;
    const result = await router.reload(
      resolveConfig({ listen: { port: 0 }, models: [model([groupA])] }),
    );
    assert(result.ok);
    assertEquals(result.plan.keep, [MODEL], "a discovery change keeps the runtime");
    await eventually(() => cluster.get(idB) === undefined, 1_000, "group b to leave");
    assertEquals(ids(), [idA]);
    assert(cluster.get(idA)!.breaker === breakerA, "group a kept its entry and breaker");
  } finally {
    await router.close();
    await Promise.all(engines.map((e) => e.close()));
  }
});

Deno.test("with admin.allowedInstanceHosts, discovered addresses outside it are skipped and counted on /metrics", async () => {
  const engine = startFakeEngine({ id: "e0", model: MODEL, timeScale: 0.001 });
  const resolveDns: ResolveDns = () => Promise.resolve(["127.0.0.1", "127.0.0.2"]);
  const config = resolveConfig({
    listen: { port: 0 },
    admin: { allowedInstanceHosts: ["127.0.0.1/32"] },
    models: [loadOnlyModel(MODEL, {
      discovery: [{ name: "a", hostname: "pool.svc", port: engine.port, intervalMs: 100 }],
    })],
  });
  const router = await createRouter(config, { log: () => {}, resolveDns });
  try {
    const { port } = await router.serve({ port: 0 });
    const cluster = router.registry.runtime(MODEL)!.cluster;
    await eventually(() => cluster.entries().length > 0, 2_000, "the allowed address to join");
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    assert(
      metrics.includes(`tidegate_discovery_refused_instances{model="${MODEL}"} 1`),
      metrics.split("\n").filter((l) => l.includes("refused")).join("\n"),
    );
    assertEquals(cluster.entries().map((e) => e.config.id), [`a-127.0.0.1:${engine.port}`]);
  } finally {
    await router.close();
    await engine.close();
  }
});

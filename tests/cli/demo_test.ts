import { assert, assertEquals } from "../assert.ts";
import { demoChat, runDemoBurst } from "../../cli/demo.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { createRouter } from "../../routes/app.ts";
import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";
import { startDemoCluster } from "../fakes/demo_cluster.ts";

Deno.test("demo: a long shared-prefix chat lands on the instance that holds the prefix, and says so", async () => {
  const cluster = await startDemoCluster({ engines: 3 });
  const router = await createRouter(resolveConfig(cluster.routerConfig()), { log: () => {} });
  const { port } = await router.serve({ port: 0 });
  const url = `http://127.0.0.1:${port}`;
  try {
    const results = await runDemoBurst(url, cluster.model, 3, 2);
    assert(results.every((r) => r.status === 200));
    const home = new Map(results.slice(0, 3).map((r) => [r.doc, r.instance]));
    assertEquals(
      new Set(home.values()).size,
      3,
      "three cold documents spread over three instances",
    );
    for (const r of results.slice(3)) {
      assertEquals(r.instance, home.get(r.doc), `doc${r.doc} follow-up`);
      assert(r.hitTokens >= 2048, `follow-up hit ${r.hitTokens} of ${r.promptTokens}`);
    }

    // What the README's curl does: a non-streaming chat sharing document 0's prefix.
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        ...demoChat(cluster.model, 0, "What does chapter 2 say?"),
        stream: false,
      }),
    });
    assertEquals(response.status, 200);
    assertEquals(response.headers.get("x-tidegate-instance"), home.get(0));
    const body = await response.json();
    const predicted = Number(response.headers.get("x-tidegate-hit-tokens"));
    // The engine hashed the same tokens the same way: it reports exactly the predicted reuse.
    assertEquals(body.usage.prompt_tokens_details.cached_tokens, predicted);

    const samples = parsePrometheusText(await (await fetch(`${url}/metrics`)).text()).samples;
    const total = (name: string) =>
      samples.filter((s) => s.name === name).reduce((sum, s) => sum + s.value, 0);
    assert(total("tidegate_engine_cached_tokens_total") > 0);
    assertEquals(total("tidegate_hit_mismatch_tokens_total"), 0);
  } finally {
    await router.close();
    await cluster.close();
  }
});

/**
 * kv.poolLoads end to end: engines that load from the store by themselves (as vLLM's
 * MooncakeStoreConnector does) report what they loaded in `cached_tokens`; the router's predicted
 * hit counts it with the flag, and the hit-mismatch metric shows a model that lacks the flag.
 */
import { assertEquals } from "../assert.ts";
import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";
import { completion, range, startTestCluster } from "../support/harness.ts";

const PROMPT = range(5000, 200); // 12 full chunks of 16: 192 tokens the store can hold

async function predictedAndMismatch(poolLoads: boolean) {
  const t = await startTestCluster({
    kv: { poolLoads, predictedIndex: { enabled: false } },
    // Each engine loads the whole stored prefix on its miss and counts it as cached.
    engine: { cachedTokens: () => 192 },
  });
  try {
    // The store holds the prompt's prefix in a segment none of the instances serves.
    for (const key of t.keys(PROMPT)) t.master.put(key, "10.9.9.9:17000");
    const response = await completion(t.url, { prompt: PROMPT });
    assertEquals(response.status, 200);
    const body = await response.json();
    assertEquals(body.usage.prompt_tokens_details.cached_tokens, 192);
    const samples = parsePrometheusText(await (await fetch(`${t.url}/metrics`)).text()).samples;
    const mismatch = samples.filter((s) => s.name === "tidegate_hit_mismatch_tokens_total")
      .reduce((sum, s) => sum + s.value, 0);
    return { predicted: Number(response.headers.get("x-tidegate-hit-tokens")), mismatch };
  } finally {
    await t.close();
  }
}

Deno.test("with kv.poolLoads the predicted hit counts what the engine loads from the store", async () => {
  assertEquals(await predictedAndMismatch(true), { predicted: 192, mismatch: 0 });
});

Deno.test("without kv.poolLoads an engine loading from the store shows as a hit mismatch", async () => {
  assertEquals(await predictedAndMismatch(false), { predicted: 0, mismatch: 192 });
});

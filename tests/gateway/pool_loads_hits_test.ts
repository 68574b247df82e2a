/**
 * kv.poolLoads end to end: engines that load from the store by themselves (as vLLM's
 * MooncakeStoreConnector does) report what they loaded in `cached_tokens`; the router's predicted
 * hit (header, access log's figure, experiment hit ratio) counts it with the flag, and the
 * hit-mismatch metric shows a model that lacks the flag.
 */
import { assertEquals } from "../assert.ts";
import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";
import { completion, range, startTestCluster } from "../support/harness.ts";
import { waitFor } from "../support/eventually.ts";

const PROMPT = range(5000, 200); // 12 full chunks of 16: 192 tokens the store can hold
const EXPERIMENT = {
  key: "header:x-session-id",
  arms: [
    { name: "A", policy: "cache_aware", weight: 1 },
    { name: "B", policy: "least_load", weight: 1 },
  ],
};

async function predictedAndMismatch(poolLoads: boolean) {
  const t = await startTestCluster({
    kv: { poolLoads, predictedIndex: { enabled: false } },
    // Each engine loads the whole stored prefix on its miss and counts it as cached.
    engine: { cachedTokens: () => 192 },
    model: { experiment: EXPERIMENT },
    top: { admin: { token: "secret" } },
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
    const report = await fetch(`${t.url}/admin/experiments`, {
      headers: { authorization: "Bearer secret" },
    });
    const arms: { name: string; hitRatio: number | null }[] =
      (await report.json()).experiments[0].arms;
    const arm = arms.find((a) => a.name === response.headers.get("x-tidegate-arm"))!;
    const logged = await waitFor(
      () => t.logs.find((l) => l.message === "request")?.fields,
      5_000,
      "the access log line",
    );
    assertEquals(logged.predictedHitTokens, Number(response.headers.get("x-tidegate-hit-tokens")));
    return {
      predicted: Number(response.headers.get("x-tidegate-hit-tokens")),
      mismatch,
      experimentHitRatio: arm.hitRatio,
    };
  } finally {
    await t.close();
  }
}

Deno.test("with kv.poolLoads the predicted hit counts what the engine loads from the store", async () => {
  assertEquals(await predictedAndMismatch(true), {
    predicted: 192,
    mismatch: 0,
    experimentHitRatio: 192 / 200,
  });
});

Deno.test("without kv.poolLoads an engine loading from the store shows as a hit mismatch", async () => {
  assertEquals(await predictedAndMismatch(false), {
    predicted: 0,
    mismatch: 192,
    experimentHitRatio: 0,
  });
});

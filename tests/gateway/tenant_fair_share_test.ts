/**
 * Weighted fair shares: while a model's SLO admission is refusing, a tenant holding more than its
 * weight's share of the admitted prompt work is refused first (429 fair_share_exceeded), the
 * others still get in, and a heavier weight lets the same tenant through.
 */
import { assertEquals, assertMatch } from "../assert.ts";
import { completion, range, startTestCluster, type TestCluster } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";

/** One second per 1k new tokens, nothing else: a 100-token prompt predicts 0.1 s of prefill. */
const MODEL_SETTINGS = {
  prefillModel: { linear: 1, quadratic: 0, constant: 0 },
  slo: { ttftS: 0.35, admission: true },
  kv: { store: "none" },
};

function tenants(weightA: number) {
  return {
    list: [
      { name: "a", match: ["key-a"], weight: weightA },
      { name: "b", match: ["key-b"], weight: 1 },
    ],
  };
}

const as = (key: string) => ({ authorization: `Bearer ${key}` });

/** Starts a request the hanging engine never answers; its prefill stays queued on the router. */
function hanging(
  t: TestCluster,
  key: string,
  tokens: number,
  from: number,
  aborts: AbortController[],
) {
  const abort = new AbortController();
  aborts.push(abort);
  const sent = t.engines[0].stats.requests.length;
  completion(t.url, { prompt: range(from, tokens), max_tokens: 1 }, as(key), abort.signal)
    .then((r) => r.body?.cancel(), () => {});
  return eventually(() => t.engines[0].stats.requests.length > sent, 5_000, "the engine has it");
}

/** Ends the hanging requests: their clients leave, and the router lets them go at once. */
async function release(t: TestCluster, aborts: AbortController[]): Promise<void> {
  for (const abort of aborts) abort.abort();
  await eventually(() => t.router.gateway.inFlight === 0, 5_000, "the hanging requests ended");
  await t.close();
}

async function underPressure(weightA: number) {
  const t = await startTestCluster({
    engines: 1,
    model: { ...MODEL_SETTINGS, kv: { store: "none" } },
    top: { tenants: tenants(weightA) },
  });
  const aborts: AbortController[] = [];
  try {
    await t.engines[0].setFailure("hang", { allEndpoints: false });
    await hanging(t, "key-a", 100, 1_000, aborts);
    await hanging(t, "key-a", 100, 2_000, aborts);
    await hanging(t, "key-b", 100, 3_000, aborts);
    // 0.3 s queued + 0.1 s: over the 0.35 s SLO, so admission refuses and shares now apply.
    const refused = await completion(t.url, { prompt: range(4_000, 100) }, as("key-a"));
    assertEquals(refused.status, 429);
    assertEquals((await refused.json()).error.code, "ttft_slo");
  } catch (error) {
    await release(t, aborts);
    throw error;
  }
  return { t, aborts };
}

Deno.test("while admission refuses, a tenant over its share yields and the other tenant gets in", async () => {
  const { t, aborts } = await underPressure(1);
  try {
    // 0.3 s queued + 0.02 s fits the SLO; a would hold 220 of 320 tokens, over its half.
    const overShare = await completion(t.url, { prompt: range(5_000, 20) }, as("key-a"));
    assertEquals(overShare.status, 429);
    assertEquals((await overShare.json()).error.code, "fair_share_exceeded");
    assertEquals(overShare.headers.get("retry-after"), "1");
    await hanging(t, "key-b", 20, 6_000, aborts); // b: 120 of 320, within its half
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assertMatch(
      metrics,
      /tidegate_tenant_requests_total\{tenant="a",result="rate_limited_fair_share"\} 1/,
    );
  } finally {
    await release(t, aborts);
  }
});

Deno.test("a heavier weight is a bigger share: the same request from a tenant weighted 3 gets in", async () => {
  const { t, aborts } = await underPressure(3);
  try {
    await hanging(t, "key-a", 20, 5_000, aborts); // a: 220 of 320, within three quarters
    // Shares still apply (the refusal window is open): 100 more would give a 320 of 420, over
    // three quarters. The share is judged once the prompt is counted, before the plan's SLO check.
    const overShare = await completion(t.url, { prompt: range(7_000, 100) }, as("key-a"));
    assertEquals(overShare.status, 429);
    assertEquals((await overShare.json()).error.code, "fair_share_exceeded");
  } finally {
    await release(t, aborts);
  }
});

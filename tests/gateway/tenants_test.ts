/**
 * Per-tenant rate limits: OpenAI's 429 with `x-ratelimit-*` and `Retry-After` once a tenant's
 * requests or prompt tokens run out, other tenants unaffected, and only configured tenant names
 * as metric labels.
 */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import { completion, range, startTestCluster } from "../support/harness.ts";

const TENANTS = {
  by: "api_key",
  list: [
    // Two requests at once, then one per 10 s: the test never waits for a refill.
    { name: "team-a", match: ["key-a"], requestsPerS: 0.1, burstS: 20 },
    { name: "team-b", match: ["key-b"], promptTokensPerS: 1, burstS: 300 },
  ],
};

const as = (key: string) => ({ authorization: `Bearer ${key}` });

Deno.test("a tenant past its requests per second gets OpenAI's 429 with rate-limit headers; others are served", async () => {
  const t = await startTestCluster({ engines: 1, top: { tenants: TENANTS } });
  try {
    for (const remaining of ["1", "0"]) {
      const ok = await completion(t.url, { prompt: range(1, 50) }, as("key-a"));
      assertEquals(ok.status, 200);
      assertEquals(ok.headers.get("x-ratelimit-limit-requests"), "2");
      assertEquals(ok.headers.get("x-ratelimit-remaining-requests"), remaining);
      await ok.body?.cancel();
    }
    const refused = await completion(t.url, { prompt: range(1, 50) }, as("key-a"));
    assertEquals(refused.status, 429);
    const error = (await refused.json()).error;
    assertEquals([error.type, error.code], ["rate_limit_error", "rate_limit_exceeded"]);
    assertMatch(error.message, /team-a on requests per second/);
    assert(Number(refused.headers.get("retry-after")) >= 1);
    assertMatch(refused.headers.get("x-ratelimit-reset-requests")!, /^\d+(\.\d)?s$/);
    const stranger = await completion(t.url, { prompt: range(1, 50) }, as("made-up-key"));
    assertEquals(stranger.status, 200, "clients no tenant matches are not limited by default");
    await stranger.body?.cancel();
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assertMatch(metrics, /tidegate_tenant_requests_total\{tenant="team-a",result="admitted"\} 2/);
    assertMatch(
      metrics,
      /tidegate_tenant_requests_total\{tenant="team-a",result="rate_limited_requests"\} 1/,
    );
    assertMatch(metrics, /tidegate_tenant_requests_total\{tenant="other",result="admitted"\} 1/);
    assert(!metrics.includes("made-up-key"), "a client's value never becomes a label");
  } finally {
    await t.close();
  }
});

Deno.test("a tenant past its prompt tokens per second is refused before any engine sees the request", async () => {
  const t = await startTestCluster({ engines: 1, top: { tenants: TENANTS } });
  try {
    const first = await completion(t.url, { prompt: range(1, 200) }, as("key-b"));
    assertEquals(first.status, 200);
    assertEquals(first.headers.get("x-ratelimit-remaining-tokens"), "100");
    await first.body?.cancel();
    const second = await completion(t.url, { prompt: range(1, 200) }, as("key-b"));
    assertEquals(second.status, 429);
    assertMatch((await second.json()).error.message, /prompt tokens per second/);
    assertEquals(second.headers.get("x-ratelimit-limit-tokens"), "300");
    assertEquals(t.engines[0].stats.requests.length, 1);
  } finally {
    await t.close();
  }
});

/** The engine learns the client's address from `X-Forwarded-For` (listen.trustedProxies). */
import { assert, assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { completion, range, startTestCluster, type TestCluster } from "./harness.ts";

/** The `X-Forwarded-For` the engine gets for a request that claims to come from 203.0.113.7. */
async function forwardedOnce(t: TestCluster): Promise<string | undefined> {
  const response = await completion(t.url, { prompt: range(1, 16), max_tokens: 1 }, {
    "x-forwarded-for": "203.0.113.7",
  });
  assertEquals(response.status, 200);
  await response.body?.cancel();
  return t.engines[0].stats.requests.at(-1)!.headers["x-forwarded-for"];
}

async function forwardedFrom(trustedProxies: string[]): Promise<string | undefined> {
  const t = await startTestCluster({ engines: 1, top: { listen: { trustedProxies } } });
  try {
    return await forwardedOnce(t);
  } finally {
    await t.close();
  }
}

Deno.test("a client's own X-Forwarded-For is replaced by its address", async () => {
  assertEquals(await forwardedFrom([]), "127.0.0.1");
});

Deno.test("a trusted proxy's X-Forwarded-For reaches the engine with the proxy's address appended", async () => {
  assertEquals(await forwardedFrom(["127.0.0.0/8"]), "203.0.113.7, 127.0.0.1");
});

Deno.test("listen.trustedProxies takes effect on reload, without a restart", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    assertEquals(await forwardedOnce(t), "127.0.0.1");
    const config = t.router.config;
    const reloaded = await t.router.reload(resolveConfig({
      ...config,
      listen: { ...config.listen, trustedProxies: ["127.0.0.0/8"] },
    }));
    assert(reloaded.ok);
    assertEquals(reloaded.plan.needsRestart, []);
    assertEquals(await forwardedOnce(t), "203.0.113.7, 127.0.0.1");
  } finally {
    await t.close();
  }
});

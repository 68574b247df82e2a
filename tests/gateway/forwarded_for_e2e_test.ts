/** The engine learns the client's address from `X-Forwarded-For` (listen.trustedProxies). */
import { assertEquals } from "../assert.ts";
import { completion, range, startTestCluster } from "./harness.ts";

async function forwardedFrom(trustedProxies: string[]): Promise<string | undefined> {
  const t = await startTestCluster({ engines: 1, top: { listen: { trustedProxies } } });
  try {
    const response = await completion(t.url, { prompt: range(1, 16), max_tokens: 1 }, {
      "x-forwarded-for": "203.0.113.7",
    });
    assertEquals(response.status, 200);
    await response.body?.cancel();
    return t.engines[0].stats.requests[0].headers["x-forwarded-for"];
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

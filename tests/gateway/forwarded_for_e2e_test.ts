/**
 * The engine learns the client's address from `X-Forwarded-For`, `Forwarded` and `X-Real-IP`
 * (listen.trustedProxies), and the router appends itself to `Via`.
 */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import {
  completion,
  MODEL,
  range,
  startTestCluster,
  type TestCluster,
} from "../support/harness.ts";
import { connect, readUntilClosed } from "./raw_http.ts";

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

/** The client-address and hop headers the engine gets for a request claiming to be forwarded. */
async function claimsSeenByEngine(trustedProxies: string[]): Promise<Record<string, string>> {
  const t = await startTestCluster({ engines: 1, top: { listen: { trustedProxies } } });
  try {
    const body = JSON.stringify({ model: MODEL, prompt: range(1, 16), max_tokens: 1 });
    const conn = await connect(t.url);
    await conn.write(new TextEncoder().encode(
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `X-Real-IP: 203.0.113.7\r\nForwarded: for=203.0.113.7\r\nVia: 1.1 edge\r\n` +
        `Connection: close, X-Hop-Secret\r\nX-Hop-Secret: s3cret\r\n` +
        `Content-Length: ${body.length}\r\n\r\n${body}`,
    ));
    assertMatch(await readUntilClosed(conn, 10_000), /^HTTP\/1\.1 200/);
    return t.engines[0].stats.requests.at(-1)!.headers;
  } finally {
    await t.close();
  }
}

Deno.test("X-Real-IP, Forwarded and Via follow the X-Forwarded-For rule; headers named in Connection stop here", async () => {
  const untrusted = await claimsSeenByEngine([]);
  assertEquals(untrusted["x-real-ip"], "127.0.0.1");
  assertEquals(untrusted["forwarded"], "for=127.0.0.1");
  assertEquals(untrusted["via"], "1.1 tidegate");
  assertEquals(untrusted["x-hop-secret"], undefined);
  const trusted = await claimsSeenByEngine(["127.0.0.0/8"]);
  assertEquals(trusted["x-real-ip"], "203.0.113.7");
  assertEquals(trusted["forwarded"], "for=203.0.113.7, for=127.0.0.1");
  assertEquals(trusted["via"], "1.1 edge, 1.1 tidegate");
  assertEquals(trusted["x-hop-secret"], undefined);
});

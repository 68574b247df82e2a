/**
 * A client that leaves while the router still waits for the engine's headers: the router notices
 * at once, releases the lease without charging the engine, and cancels the engine's request.
 * `Deno.serve` missed this whenever the body came after the headers' first read (any prompt of a
 * few hundred bytes), which is why the router listens with node:http (routes/node_listener.ts).
 * The clients are raw sockets that send headers and body apart, as real clients with long
 * prompts do.
 */
import { assertEquals } from "../assert.ts";
import { MODEL, range, startTestCluster, type TestCluster } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import { connect } from "./raw_http.ts";

/** Sends a completion's headers, then its body, on a raw connection the test closes. */
async function rawCompletion(url: string, prompt: number[]): Promise<Deno.TcpConn> {
  const body = JSON.stringify({ model: MODEL, prompt, max_tokens: 4 });
  const conn = await connect(url);
  const head = `POST /v1/completions HTTP/1.1\r\nhost: tidegate\r\n` +
    `content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
  const encoder = new TextEncoder();
  await conn.write(encoder.encode(head));
  await conn.write(encoder.encode(body));
  return conn;
}

function leasesOn(t: TestCluster, instance: string): number {
  const load = t.router.registry.runtime(MODEL)!.cluster.account.load(instance);
  return load.prefillRequests + load.decodeRequests + load.prefillTokens;
}

async function hangingCluster(): Promise<TestCluster> {
  const t = await startTestCluster({
    engines: 1,
    top: { limits: { upstreamHeadersTimeoutMs: 60_000 } },
  });
  await t.engines[0].setFailure("hang", { allEndpoints: false });
  return t;
}

// Deadlines of 10 s: a busy machine can be slow, while the failure they catch (the close not
// noticed) lasts until upstreamHeadersTimeoutMs, 60 s.
Deno.test("a client gone before the engine's headers frees its lease at once, with no breaker charge", async () => {
  const t = await hangingCluster();
  try {
    const conn = await rawCompletion(t.url, range(1, 2_000)); // a ~10 kB body
    await eventually(() => t.engines[0].stats.requests.length === 1, 5_000, "the engine has it");
    assertEquals(t.router.gateway.inFlight, 1);
    conn.close();
    await eventually(
      () => t.router.gateway.inFlight === 0 && leasesOn(t, "e0") === 0,
      10_000,
      "the router let it go",
    );
    const breaker = t.router.registry.runtime(MODEL)!.cluster.get("e0")!.breaker.snapshot();
    assertEquals(breaker.lastFailure, undefined);
  } finally {
    await t.close();
  }
});

Deno.test("a client gone before the engine's headers cancels the engine's request", async () => {
  const t = await hangingCluster();
  try {
    // A short prompt: the fake engine is a Deno.serve server, which notices its client (the
    // router) leave only when the whole request came in one read.
    const conn = await rawCompletion(t.url, range(1, 8));
    await eventually(() => t.engines[0].stats.requests.length === 1, 5_000, "the engine has it");
    conn.close();
    await eventually(() => t.engines[0].stats.hungUntilClientLeft === 1, 10_000, "cancelled");
  } finally {
    await t.close();
  }
});

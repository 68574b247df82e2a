/**
 * Clients cannot hold the router: a body trickled past `limits.clientBodyTimeoutMs` gets a 408,
 * and past `limits.maxConcurrentRequests` requests in flight the next one gets a quick 503 while
 * the ones in flight finish, after which the router serves again.
 */
import { assertEquals, assertMatch } from "../assert.ts";
import { completion, MODEL, range, startTestCluster } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import { connect, readUntil } from "./raw_http.ts";

/** The value of an unlabelled series on the router's /metrics. */
async function gauge(url: string, name: string): Promise<number | undefined> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

/** Sends a completion's head and part of its body, never the rest; what the router answers. */
async function answerToUnfinishedBody(url: string): Promise<string> {
  const conn = await connect(url);
  const head = `POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
    `content-length: 1000\r\n\r\n{"model": "${MODEL}", `;
  await conn.write(new TextEncoder().encode(head)); // ... and the rest never comes
  // 10 s: past a 200 ms limit on a busy machine, well before the 30 s default.
  return readUntil(conn, 10_000, (answer) => answer.includes("request_timeout"));
}

Deno.test("a body that does not arrive within limits.clientBodyTimeoutMs gets a 408 and never reaches an engine", async () => {
  const t = await startTestCluster({ engines: 1, top: { limits: { clientBodyTimeoutMs: 200 } } });
  try {
    const answer = await answerToUnfinishedBody(t.url);
    assertMatch(answer, /^HTTP\/1\.1 408/);
    assertMatch(answer, /limits\.clientBodyTimeoutMs/);
    assertEquals(t.engines[0].stats.requests.length, 0);
    assertEquals(t.router.gateway.inFlight, 0);
  } finally {
    await t.close();
  }
});

Deno.test("a reload's new limits.clientBodyTimeoutMs applies to the next request", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const config = t.router.config;
    const limits = { ...config.limits, clientBodyTimeoutMs: 200 };
    assertEquals((await t.router.reload({ ...config, limits })).ok, true);
    const started = performance.now();
    assertMatch(await answerToUnfinishedBody(t.url), /^HTTP\/1\.1 408/);
    assertEquals(performance.now() - started < 10_000, true, "not the 30 s default");
  } finally {
    await t.close();
  }
});

/**
 * A chunked body: its head and `chunks` (each sent `gapMs` apart, in the background while the
 * caller reads), then nothing more. Writing stops once the router closes the connection.
 */
async function chunkedBodyThatStops(
  url: string,
  chunks: string[],
  gapMs = 0,
): Promise<Deno.TcpConn> {
  const conn = await connect(url);
  const encoder = new TextEncoder();
  await conn.write(encoder.encode(
    `POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
      `transfer-encoding: chunked\r\n\r\n`,
  ));
  (async () => {
    for (const chunk of chunks) {
      const bytes = encoder.encode(chunk);
      await conn.write(encoder.encode(`${bytes.length.toString(16)}\r\n${chunk}\r\n`));
      if (gapMs) await new Promise((resolve) => setTimeout(resolve, gapMs));
    }
  })().catch(() => {}); // the router closed the connection: nothing more to send
  return conn;
}

Deno.test("a chunked body that stops gets its 408 on time and the connection closes", async () => {
  const t = await startTestCluster({ engines: 1, top: { limits: { clientBodyTimeoutMs: 300 } } });
  try {
    const conn = await chunkedBodyThatStops(t.url, [`{"model": "${MODEL}", `]);
    // The router closes the connection after its answer; 10 s is far past 300 ms on any machine.
    const answer = await readUntil(conn, 10_000);
    assertMatch(answer, /^HTTP\/1\.1 408/);
    assertMatch(answer, /request_timeout/);
    assertMatch(answer.toLowerCase(), /connection: close/);
    assertEquals(t.engines[0].stats.requests.length, 0);
    assertEquals(t.router.gateway.inFlight, 0);
  } finally {
    await t.close();
  }
});

Deno.test("a chunked body trickled past the deadline gets a 408; one over maxBodyBytes a 413", async () => {
  const t = await startTestCluster({
    engines: 1,
    top: { limits: { clientBodyTimeoutMs: 500, maxBodyBytes: 4_096 } },
  });
  try {
    // A byte every 100 ms: each read is prompt, the whole body never is.
    const trickle = Array.from({ length: 40 }, () => " ");
    const slow = await chunkedBodyThatStops(t.url, [`{"model": "${MODEL}",`, ...trickle], 100);
    assertMatch(await readUntil(slow, 10_000), /^HTTP\/1\.1 408/);
    const big = await chunkedBodyThatStops(t.url, [
      `{"model": "${MODEL}", "prompt": "`,
      "x".repeat(5_000),
    ]);
    const answer = await readUntil(big, 10_000);
    assertMatch(answer, /^HTTP\/1\.1 413/);
    assertMatch(answer, /request_too_large/);
    assertEquals(t.engines[0].stats.requests.length, 0);
  } finally {
    await t.close();
  }
});

Deno.test("a reload's new limits.maxBodyBytes applies to the next request", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const config = t.router.config;
    const limits = { ...config.limits, maxBodyBytes: 1_024 };
    assertEquals((await t.router.reload({ ...config, limits })).ok, true);
    const response = await completion(t.url, { prompt: "x".repeat(2_000) });
    assertEquals(response.status, 413);
    assertEquals((await response.json()).error.code, "request_too_large");
  } finally {
    await t.close();
  }
});

Deno.test("a client that leaves half-way through its body is not logged as the router's error", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const conn = await connect(t.url);
    await conn.write(new TextEncoder().encode(
      `POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
        `content-length: 1000\r\n\r\n{"model": "${MODEL}", `,
    ));
    conn.close();
    await eventually(() => t.router.gateway.inFlight === 0);
    // The listener saw the connection close; give its handler the turn it needs to run.
    await eventually(
      async () => {
        const text = await (await fetch(`${t.url}/metrics`)).text();
        return text.includes("tidegate_client_connections 1");
      },
      10_000,
      "only the metrics request's connection open",
    );
    assertEquals(t.logs.filter((l) => l.fields?.level === "error").map((l) => l.message), []);
  } finally {
    await t.close();
  }
});

Deno.test("past limits.maxConcurrentRequests the next request gets a 503 with Retry-After, and the count comes back down", async () => {
  const t = await startTestCluster({ engines: 1, top: { limits: { maxConcurrentRequests: 2 } } });
  try {
    await t.engines[0].setFailure("stall");
    const held = await Promise.all(
      [0, 1].map(() => completion(t.url, { prompt: range(1, 50), stream: true })),
    );
    assertEquals(t.router.gateway.inFlight, 2);
    assertEquals(await gauge(t.url, "tidegate_requests_in_flight"), 2);
    const refused = await completion(t.url, { prompt: range(1, 50) });
    assertEquals(refused.status, 503);
    assertEquals(refused.headers.get("retry-after"), "1");
    assertEquals((await refused.json()).error.code, "router_overloaded");
    await Promise.all(held.map((r) => r.body?.cancel()));
    await eventually(() => t.router.gateway.inFlight === 0, 5_000, "the streams finished");
    assertEquals(await gauge(t.url, "tidegate_requests_in_flight"), 0);
    await t.engines[0].setFailure("none");
    const served = await completion(t.url, { prompt: range(1, 50) });
    assertEquals(served.status, 200);
    await served.body?.cancel();
  } finally {
    await t.close();
  }
});

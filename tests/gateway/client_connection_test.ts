/**
 * Connection-level limits of the node:http listener (routes/node_listener.ts): a client must send
 * its headers within `limits.clientHeaderTimeoutMs`, an idle keep-alive connection is closed after
 * `limits.clientKeepAliveTimeoutMs`, and past `limits.maxConnections` a new connection gets a 503
 * in OpenAI's shape and is closed, while the router keeps serving everyone else.
 */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import {
  completion,
  MODEL,
  range,
  startTestCluster,
  type TestCluster,
} from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import { connect, readUntilClosed } from "./raw_http.ts";

const encoder = new TextEncoder();

/** Waits for the router's connection gauge to read `count`. */
function openConnectionsToBe(t: TestCluster, count: number): Promise<void> {
  const line = `tidegate_client_connections ${count}\n`;
  return eventually(async () => (await t.router.metrics.text()).includes(line), 5_000, line);
}

/** Writes one byte every 50 ms until the router stops taking them (or 10 s pass). */
async function trickle(conn: Deno.TcpConn, text: string): Promise<void> {
  for (const char of text) {
    const wrote = await conn.write(encoder.encode(char)).then(() => true, () => false);
    if (!wrote) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

Deno.test("headers trickled past limits.clientHeaderTimeoutMs: the connection closes while others are served", async () => {
  const t = await startTestCluster({ engines: 1, top: { limits: { clientHeaderTimeoutMs: 300 } } });
  try {
    const conn = await connect(t.url);
    const slow = trickle(conn, "POST /v1/completions HTTP/1.1\r\nhost: x\r\n" + "x".repeat(200));
    const started = performance.now();
    const served = await completion(t.url, { prompt: range(1, 32), max_tokens: 2 });
    assertEquals(served.status, 200);
    await served.body?.cancel();
    const answer = await readUntilClosed(conn, 5_000);
    assert(performance.now() - started >= 250, "not before the deadline");
    assertMatch(answer, /^HTTP\/1\.1 408/);
    assertMatch(answer, /"code":"request_timeout"/);
    assertMatch(answer, /limits\.clientHeaderTimeoutMs/);
    await slow;
    assertEquals(t.engines[0].stats.requests.length, 1, "only the served request reached it");
  } finally {
    await t.close();
  }
});

Deno.test("an idle keep-alive connection closes after limits.clientKeepAliveTimeoutMs", async () => {
  const t = await startTestCluster({
    engines: 1,
    top: { limits: { clientKeepAliveTimeoutMs: 300 } },
  });
  try {
    const conn = await connect(t.url);
    await conn.write(encoder.encode("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n"));
    const started = performance.now();
    const answer = await readUntilClosed(conn, 5_000);
    assertMatch(answer, /^HTTP\/1\.1 200/);
    assertMatch(answer, /keep-alive/i, "kept alive at first");
    assert(performance.now() - started >= 250, "not before the timeout");
  } finally {
    await t.close();
  }
});

Deno.test("past limits.maxConnections a new connection gets 503 router_overloaded and is closed, a silent one dropped", async () => {
  const t = await startTestCluster({ engines: 1, top: { limits: { maxConnections: 2 } } });
  const held: Deno.TcpConn[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      const conn = await connect(t.url);
      await conn.write(encoder.encode("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n"));
      await conn.read(new Uint8Array(4096)); // served: the connection is open and counted
      held.push(conn);
    }
    await openConnectionsToBe(t, 2);
    const third = await connect(t.url);
    await third.write(encoder.encode("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n"));
    const answer = await readUntilClosed(third, 5_000);
    assertMatch(answer, /^HTTP\/1\.1 503/);
    assertMatch(answer, /"code":"router_overloaded"/);
    assertMatch(answer, /limits\.maxConnections/);
    const silent = await connect(t.url);
    assertEquals(await readUntilClosed(silent, 5_000), "", "one beyond the cap sending nothing");
    held.pop()!.close();
    await openConnectionsToBe(t, 1);
    const again = await completion(t.url, { prompt: range(1, 32), max_tokens: 2 });
    assertEquals(again.status, 200, "a freed slot serves again");
    await again.body?.cancel();
  } finally {
    for (const conn of held) conn.close();
    await t.close();
  }
});

Deno.test("what is not HTTP, or has headers over 16 KiB, gets 400 or 431 in OpenAI's shape", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const cases: [string, RegExp, string][] = [
      ["NOT HTTP AT ALL\r\n\r\n", /^HTTP\/1\.1 400/, "bad_http"],
      [
        `GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: ${"a".repeat(20_000)}\r\n\r\n`,
        /^HTTP\/1\.1 431/,
        "headers_too_large",
      ],
    ];
    for (const [request, status, code] of cases) {
      const conn = await connect(t.url);
      await conn.write(encoder.encode(request)).catch(() => {});
      const answer = await readUntilClosed(conn, 5_000);
      assertMatch(answer, status);
      const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4));
      assertEquals(body.error.code, code);
    }
    const still = await completion(t.url, { prompt: range(1, 32), max_tokens: 2 });
    assertEquals(still.status, 200);
    await still.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("Host handling: HTTP/1.0 without Host is served; a missing, empty or invalid Host and CONNECT get 400 in OpenAI's shape", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const http10 = await connect(t.url);
    await http10.write(encoder.encode("GET /healthz HTTP/1.0\r\n\r\n"));
    assertMatch(await readUntilClosed(http10, 5_000), /^HTTP\/1\.1 200/);
    const refused: [string, string][] = [
      ["GET /healthz HTTP/1.1\r\n\r\n", "invalid_host"],
      ["GET /healthz HTTP/1.1\r\nHost:\r\n\r\n", "invalid_host"],
      ["GET /healthz HTTP/1.1\r\nHost: a b/c@d\r\n\r\n", "invalid_host"],
      ["GET /healthz HTTP/1.1\r\nHost: a!b\r\n\r\n", "invalid_host"],
      ["CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n", "method_not_supported"],
    ];
    for (const [request, code] of refused) {
      const conn = await connect(t.url);
      await conn.write(encoder.encode(request)).catch(() => {});
      const answer = await readUntilClosed(conn, 5_000);
      assertMatch(answer, /^HTTP\/1\.1 400/, JSON.stringify(request));
      const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4));
      assertEquals(body.error.code, code, JSON.stringify(request));
    }
    for (const host of ["example.com:8080", "[::1]:80", "10.0.0.1", "UPPER.case"]) {
      const conn = await connect(t.url);
      await conn.write(
        encoder.encode(`GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`),
      );
      assertMatch(await readUntilClosed(conn, 5_000), /^HTTP\/1\.1 200/, host);
    }
    assertEquals(t.logs.filter((l) => l.fields?.level === "error").map((l) => l.message), []);
  } finally {
    await t.close();
  }
});

Deno.test("a request asking to upgrade to WebSocket is answered as plain HTTP", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const body = JSON.stringify({ model: "test-model", prompt: range(1, 8), max_tokens: 2 });
    const conn = await connect(t.url);
    await conn.write(encoder.encode(
      "POST /v1/completions HTTP/1.1\r\nhost: x\r\nconnection: upgrade, close\r\n" +
        `upgrade: websocket\r\ncontent-type: application/json\r\ncontent-length: ${body.length}` +
        `\r\n\r\n${body}`,
    ));
    const answer = await readUntilClosed(conn, 5_000);
    assertMatch(answer, /^HTTP\/1\.1 200/);
    assertMatch(answer, /"choices"/);
  } finally {
    await t.close();
  }
});

Deno.test("a relayed answer goes out chunked to HTTP/1.1 clients and unframed to HTTP/1.0 ones", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const body = JSON.stringify({ model: MODEL, prompt: "hello there", max_tokens: 4 });
    const ask = async (version: string) => {
      const conn = await connect(t.url);
      await conn.write(encoder.encode(
        `POST /v1/completions HTTP/${version}\r\nHost: x\r\nConnection: close\r\n` +
          `content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
      ));
      const answer = await readUntilClosed(conn, 10_000);
      const split = answer.indexOf("\r\n\r\n");
      return { head: answer.slice(0, split).toLowerCase(), body: answer.slice(split + 4) };
    };
    const http11 = await ask("1.1");
    assertMatch(http11.head, /^http\/1\.1 200/);
    assertMatch(http11.head, /\r\ntransfer-encoding: chunked\r\n/);
    const http10 = await ask("1.0");
    assertMatch(http10.head, /^http\/1\.1 200/);
    assert(!http10.head.includes("transfer-encoding"), http10.head);
    assertEquals(JSON.parse(http10.body).object, "text_completion", "no chunk framing in the body");
  } finally {
    await t.close();
  }
});

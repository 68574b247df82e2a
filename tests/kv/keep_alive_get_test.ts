import { deepStrictEqual, ok, rejects, strictEqual, throws } from "node:assert/strict";
import { keepAliveGet } from "../../src/kv/keep_alive_get.ts";
import { within } from "../support/within.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A TCP server on loopback that answers each request head with `answer(head, n)` (n counts the
 * connection's requests); `undefined` closes the connection without answering, `"hang"` never
 * answers.
 */
function rawServer(answer: (head: string, n: number) => string | undefined | "hang") {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const heads: string[] = [];
  const conns = new Set<Deno.Conn>();
  let accepted = 0;
  const serve = async (conn: Deno.Conn) => {
    conns.add(conn);
    const buffer = new Uint8Array(65536);
    let text = "";
    let n = 0;
    try {
      for (;;) {
        const read = await conn.read(buffer);
        if (read === null) break;
        text += decoder.decode(buffer.subarray(0, read));
        let end: number;
        while ((end = text.indexOf("\r\n\r\n")) >= 0) {
          const head = text.slice(0, end);
          text = text.slice(end + 4);
          heads.push(head);
          const reply = answer(head, n++);
          if (reply === "hang") continue;
          if (reply === undefined) return conn.close();
          await conn.write(encoder.encode(reply));
        }
      }
      conn.close();
    } catch {
      // The client closed it.
    } finally {
      conns.delete(conn);
    }
  };
  const accepting = (async () => {
    for await (const conn of listener) {
      accepted++;
      serve(conn);
    }
  })();
  const port = (listener.addr as Deno.NetAddr).port;
  return {
    url: `http://127.0.0.1:${port}`,
    heads,
    accepted: () => accepted,
    async close() {
      listener.close();
      for (const conn of conns) {
        try {
          conn.close();
        } catch {
          // Already closed.
        }
      }
      await accepting.catch(() => {});
    },
  };
}

const okAnswer = (body: string, extra = "") =>
  `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n${extra}\r\n${body}`;

function unusedFallback(): typeof fetch {
  return () => Promise.reject(new Error("the fallback was not expected"));
}

Deno.test("sequential GETs share one kept connection and send the caller's headers", async () => {
  const server = rawServer((_, n) => okAnswer(`{"n":${n}}`));
  const client = keepAliveGet({ fallback: unusedFallback() });
  try {
    for (let i = 0; i < 5; i++) {
      const response = await client.fetch(`${server.url}/batch_query_keys?keys=a,b/c:d@e`, {
        headers: { accept: "application/json" },
      });
      strictEqual(response.status, 200);
      strictEqual(response.headers.get("content-type"), "application/json");
      strictEqual(await response.text(), `{"n":${i}}`);
    }
    strictEqual(server.accepted(), 1);
    ok(server.heads[0].startsWith("GET /batch_query_keys?keys=a,b/c:d@e HTTP/1.1\r\n"));
    ok(server.heads[0].includes(`\r\nhost: ${new URL(server.url).host}`));
    ok(server.heads[0].includes("\r\naccept: application/json"));
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("concurrent GETs open a connection each and keep them for the next ones", async () => {
  const server = rawServer(() => okAnswer("{}"));
  const client = keepAliveGet({ fallback: unusedFallback(), maxIdlePerOrigin: 2 });
  try {
    const round = () =>
      Promise.all(
        Array.from({ length: 4 }, () => client.fetch(`${server.url}/health`).then((r) => r.text())),
      );
    await round();
    strictEqual(server.accepted(), 4);
    await round();
    // Two were kept (the bound), two more opened.
    strictEqual(server.accepted(), 6);
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("a kept connection the server closed is replaced, and the GET answered", async () => {
  // The server closes every connection after its first answer without saying so.
  const server = rawServer((_, n) => n === 0 ? okAnswer('"first"') : undefined);
  const client = keepAliveGet({ fallback: unusedFallback() });
  try {
    strictEqual(await (await client.fetch(`${server.url}/a`)).text(), '"first"');
    strictEqual(await (await client.fetch(`${server.url}/b`)).text(), '"first"');
    strictEqual(server.accepted(), 2);
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("connection: close is honoured: the next GET opens another connection", async () => {
  const server = rawServer(() => okAnswer("{}", "connection: close\r\n"));
  const client = keepAliveGet({ fallback: unusedFallback() });
  try {
    await (await client.fetch(`${server.url}/a`)).text();
    await (await client.fetch(`${server.url}/a`)).text();
    strictEqual(server.accepted(), 2);
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("the caller's abort ends a GET the server never answers, as fetch's would", async () => {
  const server = rawServer(() => "hang");
  const client = keepAliveGet({ fallback: unusedFallback() });
  try {
    const started = performance.now();
    await rejects(
      client.fetch(`${server.url}/slow`, { signal: AbortSignal.timeout(50) }),
      (error: Error) => error.name === "TimeoutError",
    );
    ok(performance.now() - started < 5_000);
    const controller = new AbortController();
    const pending = client.fetch(`${server.url}/slow`, { signal: controller.signal });
    controller.abort();
    await rejects(pending, (error: Error) => error.name === "AbortError");
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("without a signal a GET is still bounded by timeoutMs", async () => {
  const server = rawServer(() => "hang");
  const client = keepAliveGet({ fallback: unusedFallback(), timeoutMs: 100 });
  try {
    await rejects(
      client.fetch(`${server.url}/slow`),
      (error: Error) => error.name === "TimeoutError",
    );
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("a refused connection and a garbled answer fail as fetch fails: a TypeError", async () => {
  const server = rawServer(() => "nonsense\r\n\r\n");
  const client = keepAliveGet({ fallback: unusedFallback() });
  try {
    await rejects(client.fetch(`${server.url}/x`), (error: Error) => {
      return error instanceof TypeError && /not an HTTP\/1\.x status line/.test(error.message);
    });
    const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (closed.addr as Deno.NetAddr).port;
    closed.close();
    await rejects(client.fetch(`http://127.0.0.1:${port}/x`), (error: Error) => {
      return error instanceof TypeError && error.message.includes(`127.0.0.1:${port}`);
    });
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("what it does not serve goes to the fallback: https, other methods, bodies, Requests", async () => {
  const seen: string[] = [];
  const fallback = ((input: RequestInfo | URL, init?: RequestInit) => {
    seen.push(`${init?.method ?? "GET"} ${input instanceof Request ? input.url : String(input)}`);
    return Promise.resolve(new Response("fallback"));
  }) as typeof fetch;
  const client = keepAliveGet({ fallback });
  await client.fetch("https://master.example:9003/health");
  await client.fetch("http://127.0.0.1:1/put", { method: "POST", body: "{}" });
  await client.fetch(new Request("http://127.0.0.1:1/health"));
  await client.fetch("http://user:pw@127.0.0.1:1/health");
  strictEqual(seen.length, 4);
  client.close();
});

Deno.test("a target outside RFC 3986's characters goes out encoded, as fetch would send it", async () => {
  const server = rawServer(() => okAnswer("{}"));
  const client = keepAliveGet({ fallback: unusedFallback() });
  try {
    await (await client.fetch(`${server.url}/batch_query_keys?keys=a b,"é"#frag`)).text();
    ok(server.heads[0].startsWith("GET /batch_query_keys?keys=a%20b,%22%C3%A9%22 HTTP/1.1"));
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("a header fetch would refuse rejects the promise, as fetch's does", async () => {
  const client = keepAliveGet({ fallback: unusedFallback() });
  const pending = client.fetch("http://127.0.0.1:1/x", { headers: { "x-bad": "a\r\nb: c" } });
  await rejects(pending, TypeError);
  client.close();
});

Deno.test("a chunked answer over a kept connection is joined, and the connection kept", async () => {
  const chunked = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" +
    '3\r\n{"a\r\n4\r\n":1}\r\n0\r\n\r\n';
  const server = rawServer(() => chunked);
  const client = keepAliveGet({ fallback: unusedFallback() });
  try {
    for (let i = 0; i < 3; i++) {
      deepStrictEqual(await (await client.fetch(`${server.url}/x`)).json(), { a: 1 });
    }
    strictEqual(server.accepted(), 1);
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("an aborted signal, before the GET or while its connection opens, rejects it", async () => {
  const server = rawServer(() => okAnswer("{}"));
  try {
    const aborted = new AbortController();
    aborted.abort();
    const client = keepAliveGet({ fallback: unusedFallback() });
    await rejects(
      client.fetch(`${server.url}/x`, { signal: aborted.signal }),
      (e: Error) => e.name === "AbortError",
    );
    strictEqual(server.accepted(), 0);
    // The abort lands after the GET began to connect, before the connection is watched.
    const controller = new AbortController();
    const opened: Deno.Conn[] = [];
    const racing = keepAliveGet({
      fallback: unusedFallback(),
      connect: async (address) => {
        controller.abort();
        const conn = await Deno.connect(address);
        opened.push(conn);
        return conn;
      },
    });
    await rejects(
      within(5_000, "the GET", racing.fetch(`${server.url}/x`, { signal: controller.signal })),
      (e: Error) => e.name === "AbortError",
    );
    strictEqual(opened.length, 1);
    // Closed by the client: using it again fails.
    throws(() => opened[0].close(), Deno.errors.BadResource);
    client.close();
    racing.close();
  } finally {
    await server.close();
  }
});

Deno.test("an abort while a kept connection is read closes it; the next GET opens another", async () => {
  const server = rawServer((_, n) => n === 0 ? okAnswer("{}") : "hang");
  const client = keepAliveGet({ fallback: unusedFallback() });
  try {
    await (await client.fetch(`${server.url}/x`)).text();
    await rejects(
      client.fetch(`${server.url}/x`, { signal: AbortSignal.timeout(50) }),
      (e: Error) => e.name === "TimeoutError",
    );
    strictEqual(await (await client.fetch(`${server.url}/x`)).text(), "{}");
    strictEqual(server.accepted(), 2);
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("close() with a GET in flight: its connection closes once answered, not kept", async () => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  const serving = (async () => {
    const conn = await listener.accept();
    const buffer = new Uint8Array(4096);
    await conn.read(buffer);
    await released;
    await conn.write(new TextEncoder().encode(okAnswer("{}")));
    // The client closes its side once it has the answer: this read ends.
    const after = await conn.read(buffer).catch(() => null);
    conn.close();
    return after;
  })();
  const client = keepAliveGet({ fallback: unusedFallback() });
  try {
    const pending = client.fetch(`http://127.0.0.1:${port}/x`);
    client.close();
    release();
    strictEqual(await (await pending).text(), "{}");
    strictEqual(await serving, null);
  } finally {
    listener.close();
  }
});

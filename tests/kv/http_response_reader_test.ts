import { deepStrictEqual, rejects, strictEqual } from "node:assert/strict";
import { type ByteSource, HttpResponseReader } from "../../src/kv/http_response_reader.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Hands out `text` in reads of `step` bytes, then the connection's end. */
function scripted(text: string, step: number): ByteSource {
  const bytes = encoder.encode(text);
  let at = 0;
  return {
    read(into) {
      if (at >= bytes.length) return Promise.resolve(null);
      const n = Math.min(step, into.length, bytes.length - at);
      into.set(bytes.subarray(at, at + n));
      at += n;
      return Promise.resolve(n);
    },
  };
}

async function readAll(text: string, step: number, maxBytes = 1 << 20) {
  const answer = await new HttpResponseReader(scripted(text, step), maxBytes).read();
  return { ...answer, text: answer.body === null ? null : decoder.decode(answer.body) };
}

const STEPS = [1, 2, 3, 7, 64, 100_000];

Deno.test("a content-length body reads the same whatever the reads' sizes", async () => {
  const body = JSON.stringify({ success: true, data: { k: "x".repeat(40_000) } });
  const text = `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${
    encoder.encode(body).length
  }\r\n\r\n${body}`;
  for (const step of STEPS) {
    const answer = await readAll(text, step);
    strictEqual(answer.status, 200);
    strictEqual(answer.statusText, "OK");
    strictEqual(answer.text, body, `reads of ${step}`);
    deepStrictEqual(answer.headers[0], ["content-type", "application/json"]);
    strictEqual(answer.reusable, true);
  }
});

Deno.test("a chunked body is joined, its extensions and trailers dropped", async () => {
  const text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
    "5;ext=1\r\nhello\r\n1\r\n \r\nb\r\nwide world!\r\n0\r\nX-Trailer: t\r\n\r\n";
  for (const step of STEPS) {
    const answer = await readAll(text, step);
    strictEqual(answer.text, "hello wide world!", `reads of ${step}`);
    strictEqual(answer.reusable, true);
  }
});

Deno.test("a body up to a bound that is no power of two is read; one byte more is refused", async () => {
  const limit = 10 * 1024 * 1024 + 7;
  const body = "x".repeat(limit);
  const answer = await readAll(`HTTP/1.1 200 OK\r\n\r\n${body}`, 1 << 20, limit);
  strictEqual(answer.body?.length, limit);
  await rejects(readAll(`HTTP/1.1 200 OK\r\n\r\n${body}x`, 1 << 20, limit), /over 10485767/);
});

Deno.test("205 has no body, whatever its content-length says", async () => {
  const answer = await readAll("HTTP/1.1 205 Reset Content\r\nContent-Length: 0\r\n\r\n", 4);
  strictEqual(answer.status, 205);
  strictEqual(answer.body, null);
});

Deno.test("interim 1xx answers are skipped; 204 has no body", async () => {
  const answer = await readAll("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", 3);
  strictEqual(answer.status, 204);
  strictEqual(answer.body, null);
  strictEqual(answer.reusable, true);
});

Deno.test("a body ended by the connection's close is read whole and not reused", async () => {
  const answer = await readAll("HTTP/1.1 503 Service Unavailable\r\n\r\nnot ready", 4);
  strictEqual(answer.status, 503);
  strictEqual(answer.text, "not ready");
  strictEqual(answer.reusable, false);
});

Deno.test("connection: close, HTTP/1.0 and bytes left over make a connection not reusable", async () => {
  const close = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";
  strictEqual((await readAll(close, 5)).reusable, false);
  strictEqual((await readAll("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 5)).reusable, false);
  const kept = "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok";
  strictEqual((await readAll(kept, 5)).reusable, true);
  const extra = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1";
  strictEqual((await readAll(extra, 100)).reusable, false);
});

Deno.test("malformed, cut short or oversized answers are errors, not answers", async () => {
  const cases: [string, RegExp, number?][] = [
    ["garbage\r\n\r\n", /not an HTTP\/1\.x status line/],
    ["HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", /malformed response header/],
    ["HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", /closed inside the response's body/],
    ["HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", /bad content-length/],
    ["HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", /bad content-length/],
    ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", /bad chunk size/],
    ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", /closed inside/],
    ["HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n", /over 1000 bytes/, 1000],
    ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7d1\r\n", /over 1000 bytes/, 1000],
    [`HTTP/1.1 200 OK\r\n\r\n${"x".repeat(5000)}`, /over 1000 bytes/, 1000],
    [`HTTP/1.1 200 OK\r\nX: ${"x".repeat(70_000)}`, /response head too large/],
    ["HTTP/1.1 200 OK\r\nContent-Le", /closed before the response's head/],
    ["HTTP/1.1 101 Switching Protocols\r\n\r\n", /switched protocols/],
    ["HTTP/1.1 099 Odd\r\n\r\n", /not an HTTP\/1\.x status line/],
    ["HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok", /malformed response header/],
    ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x10\r\n", /bad chunk size/],
    ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5zz\r\n", /bad chunk size/],
  ];
  for (const [text, error, maxBytes] of cases) {
    await rejects(readAll(text, 3, maxBytes), error, text.slice(0, 60));
  }
});

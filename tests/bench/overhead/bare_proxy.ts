/**
 * The runtime's floor for tests/bench/overhead_bench.ts: a bare Deno server that reads the body,
 * parses it as JSON, picks the upstream by its `model` (as the router does) and forwards the
 * original bytes with `fetch`, streaming the answer back. No validation, tokenizer, hashing,
 * store lookup, scheduling, metrics or logging: whatever tidegate costs above this is its own.
 *
 * `deno run -A bare_proxy.ts --port N --upstreams '{"model":"http://127.0.0.1:P",...}'`
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({
  args: Deno.args,
  options: { port: { type: "string" }, upstreams: { type: "string" } },
});
const upstreams: Record<string, string> = JSON.parse(values.upstreams ?? "{}");
const fallback = Object.values(upstreams)[0];
const decoder = new TextDecoder();

const server = Deno.serve({
  hostname: "127.0.0.1",
  port: Number(values.port ?? 0),
  onListen: ({ port }) => console.log(`bare proxy listening on ${port}`),
}, async (request) => {
  if (request.method !== "POST") return new Response("ok"); // readiness probe
  const bytes = new Uint8Array(await request.arrayBuffer());
  const body = JSON.parse(decoder.decode(bytes));
  const base = upstreams[body?.model] ?? fallback;
  const upstream = await fetch(base + new URL(request.url).pathname, {
    method: request.method,
    headers: { "content-type": "application/json" },
    body: bytes,
  });
  return new Response(upstream.body, { status: upstream.status, headers: upstream.headers });
});

const stop = () => server.shutdown();
Deno.addSignalListener("SIGTERM", stop);
Deno.addSignalListener("SIGINT", stop);
await server.finished;

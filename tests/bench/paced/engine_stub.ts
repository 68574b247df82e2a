/**
 * An engine for tests/bench/paced_stream_bench.ts that streams as a real one does: each SSE event
 * of a chat answer in its own write, `--gap-ms` apart (the benchmark's nginx stubs send a whole
 * answer at once, so a router reads it in a few chunks; a real engine's router reads one event a
 * chunk). `max_tokens` content events, then the usage event and `[DONE]`; a request without
 * `stream` gets the whole answer as JSON. `/health` and `/metrics` answer for the router's probes.
 *
 * `deno run -A engine_stub.ts --port N [--gap-ms 2]`
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({
  args: Deno.args,
  options: { port: { type: "string" }, "gap-ms": { type: "string" } },
});
const gapMs = Number(values["gap-ms"] ?? 2);
const encoder = new TextEncoder();

function event(payload: Record<string, unknown>): Uint8Array {
  const chunk = { id: "chatcmpl-paced", object: "chat.completion.chunk", created: 1, model: "m" };
  return encoder.encode(`data: ${JSON.stringify({ ...chunk, ...payload })}\n\n`);
}

function content(index: number, last: boolean): Uint8Array {
  const delta = { content: ` t${index}` };
  return event({
    choices: [{ index: 0, delta, logprobs: null, finish_reason: last ? "length" : null }],
  });
}

function usage(tokens: number): Record<string, unknown> {
  return { prompt_tokens: 12, completion_tokens: tokens, total_tokens: 12 + tokens };
}

function paced(tokens: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    async pull(controller) {
      await new Promise((resolve) => setTimeout(resolve, gapMs));
      if (sent < tokens) {
        sent++;
        return controller.enqueue(content(sent, sent === tokens));
      }
      controller.enqueue(event({ choices: [], usage: usage(tokens) }));
      controller.enqueue(encoder.encode("data: [DONE]\n\n"));
      controller.close();
    },
  });
}

Deno.serve({ hostname: "127.0.0.1", port: Number(values.port ?? 0) }, async (request) => {
  const path = new URL(request.url).pathname;
  if (path === "/metrics") return new Response("vllm:num_requests_waiting 0\n");
  if (request.method !== "POST") return new Response("ok");
  const body = await request.json();
  const tokens = Number(body.max_tokens ?? 16);
  if (body.stream) {
    return new Response(paced(tokens), { headers: { "content-type": "text/event-stream" } });
  }
  const message = { role: "assistant", content: " t".repeat(tokens) };
  return Response.json({
    id: "chatcmpl-paced",
    object: "chat.completion",
    choices: [{ index: 0, message, finish_reason: "length" }],
    usage: usage(tokens),
  });
});

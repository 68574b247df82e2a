import { assert, assertEquals } from "../assert.ts";
import { requestStreamUsage } from "../../src/proxy/stream_usage.ts";
import { UsageChunkFilter } from "../../src/proxy/usage_chunk_filter.ts";
import { observeBody } from "../../src/proxy/observed_body.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function request(body: Record<string, unknown>, text = JSON.stringify(body)) {
  return requestStreamUsage(encoder.encode(text), body);
}

Deno.test("a stream without stream_options gets include_usage spliced into its bytes", () => {
  const body = { model: "m", stream: true, prompt: "hi" };
  const out = request(body, JSON.stringify(body) + "\n  ");
  assert(out.strip);
  assertEquals(JSON.parse(decoder.decode(out.bytes)), {
    ...body,
    stream_options: { include_usage: true },
  });
  assertEquals(out.body.stream_options, { include_usage: true });
});

Deno.test("other stream_options are kept; include_usage: false is overridden and stripped", () => {
  const body = { model: "m", stream: true, stream_options: { include_usage: false, x: 1 } };
  const out = request(body);
  assert(out.strip);
  assertEquals(JSON.parse(decoder.decode(out.bytes)).stream_options, {
    include_usage: true,
    x: 1,
  });
});

Deno.test("a client that asked for usage, or did not stream, is forwarded untouched", () => {
  for (
    const body of [
      { model: "m", stream: true, stream_options: { include_usage: true } },
      { model: "m", stream: false },
      { model: "m" },
    ]
  ) {
    const bytes = encoder.encode(JSON.stringify(body));
    const out = requestStreamUsage(bytes, body);
    assertEquals(out.strip, false);
    assert(out.bytes === bytes);
  }
});

const CHUNK = (text: string) =>
  `data: {"id":"c","choices":[{"index":0,"text":"${text}"}],"usage":null}\n\n`;
const USAGE =
  `data: {"id":"c","choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":4}}}\n\n`;

async function filtered(text: string, cuts: number[]): Promise<string> {
  const bytes = encoder.encode(text);
  const bounds = [0, ...cuts, bytes.length];
  const source = new ReadableStream<Uint8Array>({
    start(controller) {
      for (let i = 1; i < bounds.length; i++) {
        controller.enqueue(bytes.slice(bounds[i - 1], bounds[i]));
      }
      controller.close();
    },
  });
  return await new Response(withoutUsage(source)).text();
}

/** The body relayed as the router relays it when it asked for the usage itself. */
function withoutUsage(source: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  return observeBody(source, { onEnd() {} }, undefined, new UsageChunkFilter());
}

Deno.test("the usage-only chunk and every usage:null are gone, whatever the chunk cuts", async () => {
  const stream = CHUNK("a") + CHUNK("b") + USAGE + "data: [DONE]\n\n";
  const expected = 'data: {"id":"c","choices":[{"index":0,"text":"a"}]}\n\n' +
    'data: {"id":"c","choices":[{"index":0,"text":"b"}]}\n\n' +
    "data: [DONE]\n\n";
  assertEquals(await filtered(stream, []), expected);
  for (let cut = 1; cut < stream.length; cut += 7) {
    assertEquals(await filtered(stream, [cut, Math.min(stream.length, cut + 3)]), expected);
  }
});

Deno.test("small and large chunks alike: the usage is found whether searched as bytes or as text", async () => {
  for (const events of [1, 10, 100]) {
    const texts = Array.from({ length: events }, (_, i) => `t${i}`);
    const stream = texts.map(CHUNK).join("") + USAGE + "data: [DONE]\n\n";
    assert(events < 100 || encoder.encode(stream).length > 4096, "a chunk past the byte search");
    const kept = texts.map((text) =>
      `data: {"id":"c","choices":[{"index":0,"text":"${text}"}]}\n\n`
    );
    assertEquals(
      await filtered(stream, []),
      kept.join("") + "data: [DONE]\n\n",
      `${events} events`,
    );
  }
});

Deno.test("usage on a content chunk is removed; other lines pass byte for byte", async () => {
  const stream = ": ping\n\n" +
    'data: {"choices":[{"index":0,"text":"x"}],"usage":{"prompt_tokens":1}}\r\n\r\n' +
    "data: [DONE]";
  assertEquals(
    await filtered(stream, [3]),
    ': ping\n\ndata: {"choices":[{"index":0,"text":"x"}]}\r\n\r\ndata: [DONE]',
  );
});

Deno.test("chunks cut inside a multibyte character come out whole, usage still removed", async () => {
  const stream = 'data: {"choices":[{"index":0,"text":"é🙂"}]}\n\n' + USAGE +
    'data: {"choices":[{"index":0,"text":"ß"}]}\n\n';
  const expected = 'data: {"choices":[{"index":0,"text":"é🙂"}]}\n\n' +
    'data: {"choices":[{"index":0,"text":"ß"}]}\n\n';
  const length = encoder.encode(stream).length;
  for (let cut = 1; cut < length; cut++) assertEquals(await filtered(stream, [cut]), expected);
});

Deno.test("a line over 1 MiB goes on unfiltered as it arrives instead of being held whole", async () => {
  const piece = encoder.encode("x".repeat(64 * 1024));
  let sent = 0;
  const source = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent++ < 48) return controller.enqueue(piece);
      controller.enqueue(encoder.encode("\ndata: [DONE]\n\n"));
      controller.close();
    },
  });
  const reader = withoutUsage(source).getReader();
  let received = 0;
  let firstOutputAfter = -1;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    if (firstOutputAfter < 0) firstOutputAfter = sent;
    received += value.length;
  }
  assertEquals(received, 48 * piece.length + 15);
  assert(firstOutputAfter <= 24, `the first output came after ${firstOutputAfter} of 49 chunks`);
});

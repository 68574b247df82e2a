import { assert, assertEquals } from "../assert.ts";
import { chunkReader } from "../../src/proxy/chunk_reader.ts";

const encoder = new TextEncoder();

/** A server answering with `parts`, each written on its own. */
function serve(parts: string[]): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => {
    let next = 0;
    return new Response(
      new ReadableStream({
        pull(controller) {
          if (next < parts.length) controller.enqueue(encoder.encode(parts[next++]));
          else controller.close();
        },
      }),
    );
  });
}

async function readAll(body: ReadableStream<Uint8Array>): Promise<Uint8Array[]> {
  const reader = chunkReader(body);
  const chunks: Uint8Array[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return chunks;
    chunks.push(value);
  }
}

Deno.test("chunk reader: a fetch body's bytes, each chunk its own copy however many reads follow", async () => {
  const parts = Array.from({ length: 50 }, (_, i) => `data: {"n":${i}}\n\n`);
  const server = serve(parts);
  try {
    const response = await fetch(`http://127.0.0.1:${server.addr.port}/`);
    const chunks = await readAll(response.body!);
    assert(chunks.length >= 1);
    const decoder = new TextDecoder();
    const text = chunks.map((chunk) => decoder.decode(chunk, { stream: true })).join("");
    assertEquals(text, parts.join(""));
    // Kept chunks are not views of one reused buffer.
    const buffers = new Set(chunks.map((chunk) => chunk.buffer));
    assertEquals(buffers.size, chunks.length);
  } finally {
    await server.shutdown();
  }
});

Deno.test("chunk reader: a stream that is not a byte stream is read as it comes", async () => {
  const chunks = await readAll(
    new ReadableStream({
      start(controller) {
        controller.enqueue(encoder.encode("a"));
        controller.enqueue(encoder.encode("bc"));
        controller.close();
      },
    }),
  );
  assertEquals(chunks.map((chunk) => new TextDecoder().decode(chunk)), ["a", "bc"]);
});

Deno.test("chunk reader: cancelling reaches the body", async () => {
  let cancelled: unknown;
  const body = new ReadableStream<Uint8Array>({
    type: "bytes",
    pull() {},
    cancel(reason) {
      cancelled = reason;
    },
  });
  await chunkReader(body).cancel("gone");
  assertEquals(cancelled, "gone");
});

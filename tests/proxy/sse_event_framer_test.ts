import { Buffer } from "node:buffer";
import { assert, assertEquals } from "../assert.ts";
import { SseEventFramer } from "../../src/proxy/sse_event_framer.ts";
import { seededRandom } from "../../src/sim/rng.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The framer before it held bytes in a growing buffer (a copy and a rescan of everything held per
 * chunk): the model the rewrite must match byte for byte.
 */
class ReferenceFramer {
  #held = new Uint8Array(0);
  push(chunk: Uint8Array): Uint8Array | undefined {
    const bytes = Buffer.concat([this.#held, chunk]);
    let found = 0;
    for (let i = bytes.length - 1; i >= 1 && found === 0; i--) {
      if (bytes[i] !== 0x0a) continue;
      if (bytes[i - 1] === 0x0a) found = i + 1;
      else if (bytes[i - 1] === 0x0d && i >= 2 && bytes[i - 2] === 0x0a) found = i + 1;
    }
    const end = bytes.length - found > 1024 * 1024 ? bytes.length : found;
    this.#held = bytes.slice(end);
    return end === 0 ? undefined : bytes.subarray(0, end);
  }
}

Deno.test("SseEventFramer passes what the copy-and-rescan framer did, however the stream is cut", () => {
  const random = seededRandom(27);
  const pieces = ["data: 1", "\n", "\r\n", "\r", ":", "x", 'data: {"é":2}'];
  for (let trial = 0; trial < 2_000; trial++) {
    let text = "";
    while (text.length < 1 + random() * 80) text += pieces[Math.floor(random() * pieces.length)];
    const bytes = encoder.encode(text);
    const framer = new SseEventFramer();
    const reference = new ReferenceFramer();
    const out: Uint8Array[] = [];
    for (let at = 0, n = 0; at < bytes.length; n++) {
      const next = Math.min(bytes.length, at + 1 + Math.floor(random() * 6));
      const part = bytes.subarray(at, next);
      at = next;
      const ready = framer.push(part);
      const expected = reference.push(part);
      assertEquals(ready && decoder.decode(ready), expected && decoder.decode(expected), text);
      if (ready) out.push(ready);
      const passed = out.reduce((sum, o) => sum + o.length, 0);
      assertEquals(framer.heldBytes, next - passed);
    }
    const rest = framer.flush();
    assertEquals(decoder.decode(Buffer.concat(rest ? [...out, rest] : out)), text);
    assertEquals(framer.heldBytes, 0);
  }
});

Deno.test("SseEventFramer: an event in many small chunks costs linear time, and past 1 MiB it goes out unframed", () => {
  // Held bytes copied and rescanned per chunk made this 16,384 pushes × ~512 KiB (seconds);
  // linear, it takes milliseconds. The bound is far from both.
  const framer = new SseEventFramer();
  const chunk = encoder.encode("x".repeat(63) + "\r");
  const started = performance.now();
  let out = 0;
  for (let i = 0; i < 16_384; i++) out += framer.push(chunk)?.byteLength ?? 0;
  const elapsedMs = performance.now() - started;
  assert(elapsedMs < 1_000, `${elapsedMs.toFixed(0)} ms for 1 MiB in 64-byte chunks`);
  assertEquals(out + framer.heldBytes, 16_384 * 64);
  assertEquals(out, 0, "exactly 1 MiB is still held");
  assertEquals(framer.push(chunk)?.byteLength, 16_385 * 64);
  assertEquals(framer.heldBytes, 0);
  // The buffer is reused: held bytes handed out are a copy that later pushes do not touch.
  const first = framer.push(encoder.encode("data: a"));
  assertEquals(first, undefined);
  const event = framer.push(encoder.encode("\n\ndata: b"))!;
  framer.push(encoder.encode("ZZZZZZZZZZZZZZZZ"));
  assertEquals(decoder.decode(event), "data: a\n\n");
});

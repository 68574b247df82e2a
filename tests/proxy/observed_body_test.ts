/**
 * An SSE stream that breaks in the middle of an event reaches the client as whole events and the
 * router's error event, never a half line glued to the error (src/proxy/sse_event_framer.ts).
 */
import { assertEquals } from "../assert.ts";
import { observeBody } from "../../src/proxy/observed_body.ts";
import { SseEventFramer } from "../../src/proxy/sse_event_framer.ts";

const encoder = new TextEncoder();
const ERROR_EVENT = 'data: {"error":{"message":"cut"}}\n\n';

/** A body that sends `parts`, then fails (or, with `stall`, goes silent). */
function engineBody(parts: string[], ending: "fail" | "stall" | "end"): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream({
    pull(controller) {
      if (i < parts.length) return controller.enqueue(encoder.encode(parts[i++]));
      if (ending === "fail") controller.error(new Error("connection reset"));
      else if (ending === "end") controller.close();
      else return new Promise(() => {}); // silent
    },
  });
}

function observedText(body: ReadableStream<Uint8Array>, idleTimeoutMs?: number): Promise<string> {
  const observed = observeBody(body, {
    onEnd() {},
    errorEvent: () => encoder.encode(ERROR_EVENT),
  }, idleTimeoutMs ? { idleTimeoutMs, maxDurationMs: 60_000 } : undefined);
  return new Response(observed).text();
}

const EVENT = 'data: {"choices":[{"text":"a"}]}\n\n';

Deno.test("an engine cut mid-line: the half event is dropped, the error event follows a whole one", async () => {
  const text = await observedText(engineBody([EVENT, 'data: {"choi', 'ces":[{"te'], "fail"));
  assertEquals(text, EVENT + ERROR_EVENT);
});

Deno.test("the idle timeout on a half-sent line ends the stream the same way", async () => {
  const text = await observedText(engineBody([EVENT, 'data: {"cho'], "stall"), 50);
  assertEquals(text, EVENT + ERROR_EVENT);
});

Deno.test("events split across chunks pass whole and in order; a clean end keeps every byte", async () => {
  const parts = ['data: {"a"', ":1}\n", "\ndata: [DO", "NE]\n\n", "trailing"];
  assertEquals(await observedText(engineBody(parts, "end")), parts.join(""));
  const crlf = ["data: 1\r\n\r\ndata:", " 2\r\n\r\n"];
  assertEquals(await observedText(engineBody(crlf, "end")), crlf.join(""));
});

Deno.test("SseEventFramer holds only what follows the last blank line", () => {
  const framer = new SseEventFramer();
  const decode = (bytes?: Uint8Array) => bytes ? new TextDecoder().decode(bytes) : undefined;
  assertEquals(decode(framer.push(encoder.encode("data: 1\n\ndata: 2"))), "data: 1\n\n");
  assertEquals(framer.heldBytes, 7);
  assertEquals(decode(framer.push(encoder.encode("\n"))), undefined);
  assertEquals(decode(framer.push(encoder.encode("\n"))), "data: 2\n\n");
  assertEquals(framer.heldBytes, 0);
  framer.push(encoder.encode("data: partial"));
  framer.discard();
  assertEquals(framer.flush(), undefined);
});

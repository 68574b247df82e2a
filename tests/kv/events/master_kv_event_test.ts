import { decode, encode } from "@msgpack/msgpack";
import { assertEquals, assertThrows } from "../../assert.ts";
import { decodeMasterKvMessage } from "../../../src/kv/events/master_kv_event.ts";

/** The messages of a real master's recording, as their frames (tests/data/README.md). */
function recordedMessages(): Uint8Array[][] {
  const text = Deno.readTextFileSync(
    new URL("../../data/mooncake_master_kv_events.txt", import.meta.url),
  );
  const messages: Uint8Array[][] = [];
  for (const block of text.split(/^===== message \d+: \d+ frames$/m).slice(1)) {
    const frames = [...block.matchAll(/^frame \d+ base64: ?(.*)$/gm)].map((m) =>
      Uint8Array.from(atob(m[1]), (c) => c.charCodeAt(0))
    );
    messages.push(frames);
  }
  return messages;
}

Deno.test("master KV events: a real master's stream decodes to its puts and removals, in order", () => {
  const batches = recordedMessages().map(decodeMasterKvMessage);
  assertEquals(batches.map((b) => b.seq), [1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n]);
  const events = batches.flatMap((b) => b.events);
  assertEquals(events.slice(0, 7).map((e) => e.type), Array(7).fill("stored"));
  assertEquals(events[0], {
    type: "stored",
    key: "1b8835f50e6eb548867376881567824fefd4b63b61ac74f9cc8c674205adbf43_0",
  });
  assertEquals(events[4], { type: "stored", key: "12345" });
  assertEquals(events.slice(7), [
    { type: "removed", key: "1b8835f50e6eb548867376881567824fefd4b63b61ac74f9cc8c674205adbf43_0" },
    { type: "removed", key: "c2e91751805771b194db1eb407f4d1a2f962b6e107f12686463503825a7d3d29_0" },
  ]);
});

Deno.test("master KV events: a message without object keys is refused with the flag to set", () => {
  const [first] = recordedMessages();
  const [ts, events] = decode(first[2], { useBigInt64: true }) as [
    unknown,
    Record<string, unknown>[],
  ];
  const { object_key: _dropped, ...rest } = events[0];
  const payload = encode([ts, [rest], 0], { useBigInt64: true });
  assertThrows(
    () => decodeMasterKvMessage([first[0], first[1], payload]),
    Error,
    "--kv_events_emit_object_key",
  );
  assertThrows(() => decodeMasterKvMessage([first[0], first[1]]), Error, "3 frames");
});

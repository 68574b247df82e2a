import { assertEquals, assertThrows } from "../../assert.ts";
import {
  checkGreeting,
  greeting,
  message,
  readyCommand,
  subscription,
  ZmtpReader,
} from "../../../src/kv/events/zmtp_codec.ts";

Deno.test("ZMTP: our greeting is a 3.0 NULL greeting, and a peer's is checked", () => {
  const bytes = greeting();
  assertEquals(bytes.length, 64);
  assertEquals([bytes[0], bytes[9], bytes[10], bytes[11]], [0xff, 0x7f, 3, 0]);
  assertEquals(new TextDecoder().decode(bytes.subarray(12, 16)), "NULL");
  checkGreeting(bytes);
  const plain = greeting();
  plain.set(new TextEncoder().encode("PLAIN"), 12);
  assertThrows(() => checkGreeting(plain), Error, "PLAIN mechanism");
  const old = greeting();
  old[10] = 2;
  assertThrows(() => checkGreeting(old), Error, "3.0 or later");
  assertThrows(() => checkGreeting(new Uint8Array(64)), Error, "signature");
});

Deno.test("ZMTP: READY names the socket type; a subscription is 1 and the topic", () => {
  const ready = readyCommand("SUB");
  assertEquals([ready[0], ready[1]], [0x04, ready.length - 2]);
  assertEquals(
    new TextDecoder().decode(ready.subarray(2)),
    "\x05READY\x0bSocket-Type\0\0\0\x03SUB",
  );
  assertEquals([...subscription("kv")], [0x00, 3, 1, 0x6b, 0x76]);
});

Deno.test("ZMTP: the reader rebuilds messages across chunks, short and long frames alike", () => {
  const long = Uint8Array.from({ length: 70_000 }, (_, i) => i % 251);
  const bytes = new Uint8Array([
    ...readyCommand("PUB"),
    ...message([new Uint8Array(0), Uint8Array.of(0, 0, 0, 0, 0, 0, 0, 7), long]),
    ...message([Uint8Array.of(9)]),
  ]);
  const reader = new ZmtpReader();
  const items = [];
  for (let at = 0; at < bytes.length; at += 997) {
    items.push(...reader.push(bytes.slice(at, at + 997)));
  }
  assertEquals(items.length, 3);
  assertEquals(items[0], { kind: "command", name: "READY" });
  assertEquals(items[1], {
    kind: "message",
    parts: [new Uint8Array(0), Uint8Array.of(0, 0, 0, 0, 0, 0, 0, 7), long],
  });
  assertEquals(items[2], { kind: "message", parts: [Uint8Array.of(9)] });
});

Deno.test("ZMTP: a malformed frame or one past the size bound is refused", () => {
  assertThrows(() => new ZmtpReader().push(Uint8Array.of(0x80, 1, 0)), Error, "flags");
  const huge = new Uint8Array(9);
  huge[0] = 0x02;
  new DataView(huge.buffer).setBigUint64(1, 1n << 40n);
  assertThrows(() => new ZmtpReader(1024).push(huge), Error, "bytes");
});

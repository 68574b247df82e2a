import { encode } from "@msgpack/msgpack";
import { assertEquals, assertThrows } from "../../assert.ts";
import {
  blockId,
  decodeKvEventMessage,
  decodeKvEventPayload,
} from "../../../src/kv/events/engine_kv_event.ts";

/** A batch as vLLM's msgspec encoder lays it out: array-like batch, events tagged by `type`. */
function vllmPayload(events: unknown[]): Uint8Array {
  return encode([1_764_000_000.5, events, 0], { useBigInt64: true });
}

const DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

Deno.test("KV events: vLLM's int hashes (low 64 bits) and whole digests reduce to one block id", () => {
  const low = BigInt(`0x${DIGEST.slice(-16)}`);
  const bytes = Uint8Array.from(DIGEST.match(/../g)!.map((h) => parseInt(h, 16)));
  const events = decodeKvEventPayload(vllmPayload([
    {
      type: "BlockStored",
      block_hashes: [low, bytes, 5],
      parent_block_hash: null,
      token_ids: [1, 2, 3],
      block_size: 16,
      lora_id: null,
      medium: "GPU",
      lora_name: null,
    },
    { type: "BlockRemoved", block_hashes: [low], medium: "CPU" },
    { type: "AllBlocksCleared" },
  ]));
  assertEquals(events, [
    {
      type: "stored",
      blocks: [blockId(DIGEST), blockId(DIGEST), "0000000000000005"],
      medium: "GPU",
      blockSize: 16,
    },
    { type: "removed", blocks: [blockId(DIGEST)], medium: "CPU" },
    { type: "cleared" },
  ]);
  assertEquals(blockId(DIGEST), "d15d6c15b0f00a08");
});

Deno.test("KV events: a hash with the top bit set (a negative int64 to msgpack) keeps its 64 bits", () => {
  const events = decodeKvEventPayload(vllmPayload([
    { type: "BlockRemoved", block_hashes: [-1n], medium: null },
  ]));
  assertEquals(events, [{ type: "removed", blocks: ["ffffffffffffffff"] }]);
});

Deno.test("KV events: the three frames give the batch's sequence number and timestamp", () => {
  const seq = new Uint8Array(8);
  new DataView(seq.buffer).setBigUint64(0, 41n);
  const batch = decodeKvEventMessage([
    new Uint8Array(0),
    seq,
    vllmPayload([{ type: "AllBlocksCleared" }]),
  ]);
  assertEquals(batch, { seq: 41n, ts: 1_764_000_000.5, events: [{ type: "cleared" }] });
});

Deno.test("KV events: what is not a batch is refused with the reason", () => {
  assertThrows(() => decodeKvEventMessage([new Uint8Array(8)]), Error, "3 frames");
  assertThrows(
    () => decodeKvEventMessage([new Uint8Array(0), new Uint8Array(3), new Uint8Array(0)]),
    Error,
    "8 bytes",
  );
  assertThrows(() => decodeKvEventPayload(encode({ not: "a batch" })), Error, "array");
  assertThrows(
    () => decodeKvEventPayload(vllmPayload([{ type: "BlockMoved", block_hashes: [] }])),
    Error,
    "unknown KV event type",
  );
  assertThrows(
    () => decodeKvEventPayload(vllmPayload([{ type: "BlockStored", block_hashes: ["x"] }])),
    Error,
    "integer or bytes",
  );
});

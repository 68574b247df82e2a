import { decode } from "@msgpack/msgpack";
import { decodeSeq } from "./engine_kv_event.ts";

/**
 * The Mooncake master's KV events (its optional ZMQ publisher, `--enable_kv_events`): each
 * message `[topic, seq (8 bytes, big-endian, from 1), payload]`, the payload a msgpack array
 * `[ts, events, dp_rank]` whose events are maps tagged by `type` (BlockStored, BlockRemoved,
 * AllBlocksCleared) carrying the store's `object_key`, the master's `backend_id` and the medium,
 * but not which client's segment holds the replica (tests/data/mooncake_master_kv_events.txt, a
 * real master's recording). Pure: bytes in, events out; anything else throws.
 */
export type MasterKvEvent =
  | { type: "stored"; key: string }
  | { type: "removed"; key: string }
  | { type: "cleared" };

export interface MasterKvEventBatch {
  seq: bigint;
  events: MasterKvEvent[];
}

export function decodeMasterKvMessage(frames: readonly Uint8Array[]): MasterKvEventBatch {
  if (frames.length !== 3) throw new Error(`a KV event message has 3 frames, got ${frames.length}`);
  const batch = decode(frames[2], { useBigInt64: true });
  if (!Array.isArray(batch) || batch.length < 2 || !Array.isArray(batch[1])) {
    throw new Error("a KV event batch is an array [ts, events, ...]");
  }
  return { seq: decodeSeq(frames[1]), events: batch[1].map(decodeEvent) };
}

function decodeEvent(raw: unknown): MasterKvEvent {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    throw new Error("a KV event is a map tagged by `type`");
  }
  const event = raw as Record<string, unknown>;
  if (event.type === "AllBlocksCleared") return { type: "cleared" };
  if (event.type !== "BlockStored" && event.type !== "BlockRemoved") {
    throw new Error(`unknown KV event type ${JSON.stringify(event.type)}`);
  }
  if (typeof event.object_key !== "string") {
    throw new Error("the master's event names no object_key (--kv_events_emit_object_key)");
  }
  return { type: event.type === "BlockStored" ? "stored" : "removed", key: event.object_key };
}

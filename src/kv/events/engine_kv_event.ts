import { decode } from "@msgpack/msgpack";

/**
 * vLLM's KV events as its ZMQ publisher sends them (vllm/distributed/kv_events.py, 0.32): each
 * message is `[topic, seq (8 bytes, big-endian), payload]`, the payload a msgpack
 * `KVEventBatch`, an array `[ts, events, data_parallel_rank?]` whose events are maps tagged by
 * `type`: `BlockStored` (block_hashes, parent_block_hash, token_ids, block_size, medium, ...),
 * `BlockRemoved` (block_hashes, medium) and `AllBlocksCleared`. A block hash is published as the
 * low 64 bits of its digest (an integer, vLLM's default) or as the whole digest (bytes, with
 * `VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0`); both reduce to the same 16 hex digits here, which is
 * how a router's block hash (src/hashing) is compared with them: `blockId`.
 * Pure: bytes in, events out; a payload that is not such a batch throws.
 */

export type EngineKvEvent =
  | { type: "stored"; blocks: string[]; parent?: string; medium?: string; blockSize?: number }
  | { type: "removed"; blocks: string[]; medium?: string }
  | { type: "cleared" };

export interface EngineKvEventBatch {
  /** The publisher's sequence number of this batch (consecutive from 0 per publisher). */
  seq: bigint;
  /**
   * When the engine made the batch (seconds, the payload's `ts`): with `seq`, what tells one
   * publisher's batch from another's after a restart (src/kv/events/engine_block_index.ts).
   */
  ts?: number;
  events: EngineKvEvent[];
}

/** The low 64 bits of a block hash as 16 hex digits: the form both publications reduce to. */
export function blockId(hexDigest: string): string {
  return hexDigest.slice(-16).padStart(16, "0").toLowerCase();
}

/** A ZMQ message's three frames to a batch; throws on anything else. */
export function decodeKvEventMessage(frames: readonly Uint8Array[]): EngineKvEventBatch {
  if (frames.length !== 3) throw new Error(`a KV event message has 3 frames, got ${frames.length}`);
  const seq = decodeSeq(frames[1]);
  return { seq, ...decodeKvEventBatch(frames[2]) };
}

/** An 8-byte big-endian sequence number (signed: vLLM's replay end marker is -1). */
export function decodeSeq(frame: Uint8Array): bigint {
  if (frame.byteLength !== 8) throw new Error(`a sequence number has 8 bytes, got ${frame.length}`);
  return new DataView(frame.buffer, frame.byteOffset, 8).getBigInt64(0, false);
}

export function decodeKvEventPayload(payload: Uint8Array): EngineKvEvent[] {
  return decodeKvEventBatch(payload).events;
}

function decodeKvEventBatch(payload: Uint8Array): { ts?: number; events: EngineKvEvent[] } {
  const batch = decode(payload, { useBigInt64: true });
  if (!Array.isArray(batch) || batch.length < 2 || !Array.isArray(batch[1])) {
    throw new Error("a KV event batch is an array [ts, events, ...]");
  }
  const ts = typeof batch[0] === "number" ? batch[0] : undefined;
  return { ...(ts === undefined ? {} : { ts }), events: batch[1].map(decodeEvent) };
}

function decodeEvent(raw: unknown): EngineKvEvent {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    throw new Error("a KV event is a map tagged by `type`");
  }
  const event = raw as Record<string, unknown>;
  switch (event.type) {
    case "BlockStored":
      return {
        type: "stored",
        blocks: hashes(event.block_hashes),
        ...(event.parent_block_hash == null ? {} : { parent: hashOf(event.parent_block_hash) }),
        ...(typeof event.medium === "string" ? { medium: event.medium } : {}),
        ...(typeof event.block_size === "number" ? { blockSize: event.block_size } : {}),
      };
    case "BlockRemoved":
      return {
        type: "removed",
        blocks: hashes(event.block_hashes),
        ...(typeof event.medium === "string" ? { medium: event.medium } : {}),
      };
    case "AllBlocksCleared":
      return { type: "cleared" };
    default:
      throw new Error(`unknown KV event type ${JSON.stringify(event.type)}`);
  }
}

function hashes(value: unknown): string[] {
  if (!Array.isArray(value)) throw new Error("block_hashes is a list");
  return value.map(hashOf);
}

/** An integer (the digest's low 64 bits) or the digest's bytes, to `blockId` form. */
function hashOf(value: unknown): string {
  if (typeof value === "bigint") return BigInt.asUintN(64, value).toString(16).padStart(16, "0");
  if (typeof value === "number" && Number.isInteger(value) && value >= 0) {
    return value.toString(16).padStart(16, "0");
  }
  if (value instanceof Uint8Array) {
    let hex = "";
    for (const byte of value.subarray(Math.max(0, value.length - 8))) {
      hex += byte.toString(16).padStart(2, "0");
    }
    return hex.padStart(16, "0");
  }
  throw new Error(`a block hash is an integer or bytes, got ${typeof value}`);
}

/**
 * What router replicas tell each other about their dispatches (cluster.sharedState): a lease
 * taken on an instance with its uncomputed prefill tokens (and the sequences it decodes), its
 * first token, its end, and the KV
 * keys an instance is about to write; periodically, which of its leases are still out (a lost end
 * is repaired by the next one). Pure: encoding and checking only; shared_state.ts sends.
 */

export type Fact =
  | { k: "lease"; model: string; instance: string; id: string; tokens: number; seqs?: number }
  | { k: "first"; model: string; id: string }
  | { k: "end"; model: string; id: string }
  | { k: "keys"; model: string; instance: string; kvHost?: string; keys: string[] }
  /** A Responses API response stored on `instance` (src/cluster/response_homes.ts). */
  | { k: "home"; model: string; id: string; instance: string };

/** A lease still out, as a snapshot lists it (`id` as in its lease fact). */
export interface LiveLease {
  model: string;
  instance: string;
  id: string;
  tokens: number;
  /** Sequences it decodes (`n` > 1, a batch); absent: one (replicas before it was sent). */
  seqs?: number;
  /** Past its first token. */
  decoding: boolean;
}

/**
 * Part of a replica's snapshot: of its leases numbered `from` (included) to `to` (excluded),
 * exactly `leases` are still out. Lease ids are the replica's counter in decimal.
 */
export interface LiveRange {
  from: number;
  to: number;
  leases: LiveLease[];
}

/** One message: a replica's facts of one event-loop turn, or one part of its snapshot. */
export interface FactBatch {
  v: 1;
  replica: string;
  facts: Fact[];
  live?: LiveRange;
  /** The sender (back online) asks the others for their snapshots. */
  catchUp?: boolean;
}

export function encodeBatch(batch: FactBatch): string {
  return JSON.stringify(batch);
}

/** The batch in `text`, or why it is not one (a message from a future or broken replica). */
export function decodeBatch(text: string): FactBatch | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return "not JSON";
  }
  const batch = value as Partial<FactBatch>;
  if (!batch || batch.v !== 1) return "unknown version";
  if (typeof batch.replica !== "string" || !Array.isArray(batch.facts)) {
    return "no replica or facts";
  }
  const bad = batch.facts.find((fact) => !isFact(fact));
  if (bad !== undefined) return `malformed fact ${JSON.stringify(bad)}`;
  if (batch.live !== undefined && !isLiveRange(batch.live)) return "malformed live range";
  if (batch.catchUp !== undefined && typeof batch.catchUp !== "boolean") return "malformed catchUp";
  return batch as FactBatch;
}

function isLiveRange(range: unknown): range is LiveRange {
  const r = range as Record<string, unknown>;
  return !!r && Number.isInteger(r.from) && Number.isInteger(r.to) &&
    Array.isArray(r.leases) && r.leases.every(isLiveLease);
}

function isLiveLease(lease: unknown): lease is LiveLease {
  const l = lease as Record<string, unknown>;
  return !!l && typeof l.model === "string" && typeof l.instance === "string" &&
    typeof l.id === "string" && typeof l.tokens === "number" && l.tokens >= 0 &&
    typeof l.decoding === "boolean" && isSequences(l.seqs);
}

function isFact(fact: unknown): fact is Fact {
  const f = fact as Record<string, unknown>;
  if (!f || typeof f.model !== "string") return false;
  switch (f.k) {
    case "lease":
      return typeof f.instance === "string" && typeof f.id === "string" &&
        typeof f.tokens === "number" && f.tokens >= 0 && isSequences(f.seqs);
    case "first":
    case "end":
      return typeof f.id === "string";
    case "home":
      return typeof f.instance === "string" && typeof f.id === "string" &&
        f.id.length > 0 && f.id.length <= MAX_RESPONSE_ID_CHARS;
    case "keys":
      return typeof f.instance === "string" && Array.isArray(f.keys) &&
        f.keys.every((key) => typeof key === "string") &&
        (f.kvHost === undefined || typeof f.kvHost === "string");
    default:
      return false;
  }
}

/** Response ids are short (`resp_` and 32 hex digits); anything longer is not one. */
const MAX_RESPONSE_ID_CHARS = 256;

function isSequences(value: unknown): boolean {
  return value === undefined || (Number.isInteger(value) && (value as number) >= 1);
}

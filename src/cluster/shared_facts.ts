/**
 * What router replicas tell each other about their dispatches (cluster.sharedState): a lease
 * taken on an instance with its uncomputed prefill tokens, its first token, its end, and the KV
 * keys an instance is about to write. Pure: encoding and checking only; shared_state.ts sends.
 */

export type Fact =
  | { k: "lease"; model: string; instance: string; id: string; tokens: number }
  | { k: "first"; model: string; id: string }
  | { k: "end"; model: string; id: string }
  | { k: "keys"; model: string; instance: string; kvHost?: string; keys: string[] };

/** One message: a replica's facts of one event-loop turn; an empty list is a heartbeat. */
export interface FactBatch {
  v: 1;
  replica: string;
  facts: Fact[];
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
  return bad === undefined ? batch as FactBatch : `malformed fact ${JSON.stringify(bad)}`;
}

function isFact(fact: unknown): fact is Fact {
  const f = fact as Record<string, unknown>;
  if (!f || typeof f.model !== "string") return false;
  switch (f.k) {
    case "lease":
      return typeof f.instance === "string" && typeof f.id === "string" &&
        typeof f.tokens === "number" && f.tokens >= 0;
    case "first":
    case "end":
      return typeof f.id === "string";
    case "keys":
      return typeof f.instance === "string" && Array.isArray(f.keys) &&
        f.keys.every((key) => typeof key === "string") &&
        (f.kvHost === undefined || typeof f.kvHost === "string");
    default:
      return false;
  }
}

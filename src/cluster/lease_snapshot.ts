/**
 * A replica's snapshot of its live leases, cut into bounded messages: each part covers a range of
 * lease ids and lists the ones still out in it, so every part can be applied on its own (a lost
 * part only delays the repair of its range). Pure.
 */
import type { LiveLease, LiveRange } from "./shared_facts.ts";

/** Leases per snapshot message. */
export const LEASES_PER_PART = 64;

/**
 * Splits `live` (in increasing id order) into ranges of at most `perPart` leases that together
 * cover every id below `nextId`; with no lease out, one empty range.
 */
export function snapshotParts(
  live: readonly LiveLease[],
  nextId: number,
  perPart = LEASES_PER_PART,
): LiveRange[] {
  const parts: LiveRange[] = [];
  for (let start = 0; start < live.length; start += perPart) {
    const leases = live.slice(start, start + perPart);
    const from = start === 0 ? 0 : Number(leases[0].id);
    parts.push({ from, to: nextId, leases });
    if (parts.length > 1) parts[parts.length - 2].to = from;
  }
  return parts.length > 0 ? parts : [{ from: 0, to: nextId, leases: [] }];
}

/**
 * A prompt's home: the instance a new prefix belongs on. The part of a prompt no instance holds
 * is named by the key of its first block (a chain hash names the whole prefix up to it), and
 * rendezvous hashing ranks the healthy instances for that key. Every miss of one prefix then
 * lands on the same instance while it is healthy, so each cache sees its share of the prefixes
 * instead of all of them (docs/sim/workloads/README.md measures what that is worth).
 */
import type { BlockKey, Candidate, ScheduleRequest } from "./types.ts";

export type { BlockKey };

/**
 * The longest prefix of the prompt some healthy candidate holds, locally or in the pool, in
 * tokens; the last prompt token is never reused (the engine recomputes it).
 */
export function heldPrefixTokens(
  request: ScheduleRequest,
  candidates: readonly Candidate[],
): number {
  const reusable = Math.max(0, request.promptTokens - 1);
  let local = 0;
  for (const c of candidates) if (c.healthy) local = Math.max(local, c.localPrefixTokens);
  return Math.min(reusable, Math.max(local, request.poolPrefixTokens));
}

/**
 * The key of the block holding the first token past what the candidates hold, or undefined when
 * the prompt's keys end before it (the router keys whole chunks only, a trace every block).
 */
export function unheldBlockKey(
  keyAt: (index: number) => BlockKey | undefined,
  blockTokens: number,
  heldTokens: number,
): BlockKey | undefined {
  if (!(blockTokens > 0)) return undefined;
  return keyAt(Math.floor(Math.max(0, heldTokens) / blockTokens));
}

/** The healthy candidate rendezvous hashing ranks first for `key`; undefined when none is. */
export function homeOf(key: BlockKey, candidates: readonly Candidate[]): string | undefined {
  let home: string | undefined;
  let best = -1;
  for (const candidate of candidates) {
    if (!candidate.healthy) continue;
    const weight = mix32(`${key}\u0000${candidate.id}`);
    if (weight > best || (weight === best && candidate.id < home!)) {
      home = candidate.id;
      best = weight;
    }
  }
  return home;
}

/** FNV-1a over UTF-16 units with a final avalanche: uniform enough to spread keys, and fast. */
function mix32(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}

/**
 * `request` with the key its new part is placed by (`homeKey`), looked up from the prompt's
 * block keys past what `candidates` hold; the callers (the router and the simulators) share it.
 */
export function withHomeKey(
  request: ScheduleRequest,
  candidates: readonly Candidate[],
  keyAt: (index: number) => BlockKey | undefined,
  blockTokens: number,
): ScheduleRequest {
  const held = heldPrefixTokens(request, candidates);
  // Held whole (all but the last token, which is always recomputed): nothing new to place.
  if (held >= request.promptTokens - 1) return request;
  const key = unheldBlockKey(keyAt, blockTokens, held);
  return key === undefined ? request : { ...request, homeKey: key };
}

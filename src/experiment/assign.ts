import { sha256Hex } from "../hashing/sha256_digest.ts";
import { CLUSTERS } from "./clustered.ts";
import type { AssignmentKind } from "../contracts.ts";

/**
 * Sticky arm assignment by weighted rendezvous hashing: every arm draws a uniform number from
 * hash(salt, arm, key) and the arm with the smallest −ln(u)/weight wins. Each arm gets a share
 * of keys equal to its share of the weights; a key never moves while arms and weights stay the
 * same; adding an arm only takes keys from the others (none move between the old arms), and
 * removing one only moves its own keys. Pure: randomness for keyless requests comes in.
 */

export interface WeightedArm {
  name: string;
  weight: number;
}

export interface AssignOptions {
  /** Changing the salt reshuffles every key (a fresh experiment on the same traffic). */
  salt: string;
  /** Requests without a key value: a weighted random arm per request, or the control arm. */
  fallback: "random" | "control";
  random: () => number;
}

/** Uniform in (0, 1) from SHA-256 of the salt, the arm name and the key (48 bits). */
function keyUniform(salt: string, arm: string, key: string): number {
  const hex = sha256Hex(new TextEncoder().encode(`${salt}\u0000${arm}\u0000${key}`));
  return (parseInt(hex.slice(0, 12), 16) + 0.5) / 2 ** 48;
}

/**
 * A long key (a chat opening) stands in as its digest, so it is hashed once rather than once per
 * arm. Idempotent: a digest is 64 characters and stays as it is.
 */
function compactKey(key: string): string {
  return key.length > 64 ? sha256Hex(new TextEncoder().encode(key)) : key;
}

/** The arm index a key value sticks to. */
export function stickyArm(arms: readonly WeightedArm[], key: string, salt: string): number {
  const compact = compactKey(key);
  let best = 0, bestScore = Number.POSITIVE_INFINITY;
  arms.forEach((arm, i) => {
    const score = -Math.log(keyUniform(salt, arm.name, compact)) / arm.weight;
    if (score < bestScore) {
      bestScore = score;
      best = i;
    }
  });
  return best;
}

/** A weighted random arm index for a uniform `u` in [0, 1). */
export function weightedArm(arms: readonly WeightedArm[], u: number): number {
  const total = arms.reduce((sum, arm) => sum + arm.weight, 0);
  let target = u * total;
  for (let i = 0; i < arms.length; i++) {
    target -= arms[i].weight;
    if (target < 0) return i;
  }
  return arms.length - 1;
}

/** A compact key's statistics bucket (src/experiment/clustered.ts): one session, one bucket. */
function clusterOf(compact: string, salt: string): number {
  return Math.floor(keyUniform(salt, "\u0001cluster", compact) * CLUSTERS);
}

/**
 * The arm of one request: sticky by `key` when there is one; `key === null` means the
 * experiment assigns at random on purpose; `undefined` means the key was missing (fallback).
 * Also the request's statistics bucket: the key's, or a random one for a keyless request.
 */
export function assignArm(
  arms: readonly WeightedArm[],
  key: string | null | undefined,
  options: AssignOptions,
): { index: number; kind: AssignmentKind; cluster: number } {
  if (typeof key === "string") {
    // Digested once here (stickyArm() leaves a compact key as it is).
    const compact = compactKey(key);
    return {
      index: stickyArm(arms, compact, options.salt),
      kind: "sticky",
      cluster: clusterOf(compact, options.salt),
    };
  }
  const index = key === null || options.fallback === "random"
    ? weightedArm(arms, options.random())
    : 0;
  return {
    index,
    kind: key === null ? "random" : "fallback",
    cluster: Math.floor(options.random() * CLUSTERS),
  };
}

import type { HashAlgorithm, KvGroupKind } from "./types.ts";

/** A compiled key piece: literal text, the chunk hash (HEX) or the chunk index (INDEX). */
export const HEX = 0;
export const INDEX = 1;
export type Piece = string | typeof HEX | typeof INDEX;
export type Template = readonly Piece[];

/** Key options with defaults applied and checked (docs/compat.md §3). */
export interface Params {
  hash?: HashAlgorithm;
  model?: string;
  dtype?: string;
  tag?: string;
  cachePrefix?: string;
  group?: number;
  tpRank: number;
  ppRank: number;
  tpSize: number;
  ppSize: number;
  worldSize: number;
  workerId: number;
  mla: boolean;
  numKvHeads?: number;
  dcpSize: number;
  pcpSize: number;
  /** Each vLLM KV-cache group's kind; undefined when `groups` is not set. */
  groups?: readonly KvGroupKind[];
  tpLcmSize?: number;
  lmcacheTags: readonly (readonly [string, string])[];
}

/** The keys of one chunk layout. */
export interface Layout {
  primary: Template;
  /** Every key a chunk needs with `requireAllRanks`, `primary` included. */
  all: Template[];
  /** Keys a chunk needs even without `requireAllRanks` (default: `[primary]`). */
  required?: Template[];
  /** Another layout for a trailing unfull chunk (Llumnix's sha256_hex keys). */
  unfull?: Layout;
}

/** vLLM: `model.rstrip("/").split("/")[-1]`. */
export function basename(model: string): string {
  const parts = model.replace(/\/+$/, "").split("/");
  return parts[parts.length - 1];
}

export function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

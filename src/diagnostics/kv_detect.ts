import { detectCandidates } from "../hashing/detect_candidates.ts";
import { type DetectedScheme, rankDetected } from "../hashing/detect_report.ts";
import { createKeyScheme } from "../hashing/key_scheme.ts";
import type { KeySchemeOptions } from "../hashing/types.ts";
import type { KvIndex, LookupResult } from "../kv/types.ts";

export interface DetectRequest {
  /** The store to ask; its `lookup` is called twice (probe, then confirm). */
  client: KvIndex;
  configured: KeySchemeOptions;
  /** The model name whose spellings are tried. */
  model: string;
  prompts: readonly (readonly number[])[];
  /** Keys read from the store (`GET /get_all_keys` sample): their literal parts are tried. */
  sampleKeys?: readonly string[];
  /** Per lookup (default 1500 ms). */
  deadlineMs?: number;
  /** Most survivors confirmed (default 64). */
  maxSurvivors?: number;
  now?: () => number;
}

export interface DetectResult {
  /** False when the store could not be asked: `schemes` is then empty, not a verdict. */
  asked: boolean;
  error?: string;
  candidates: number;
  probedKeys: number;
  survivors: number;
  confirmedKeys: number;
  probeMs: number;
  confirmMs: number;
  /** Best first; only schemes with chunk 0 present for at least one prompt. */
  schemes: DetectedScheme[];
}

/**
 * `keys --detect` and `POST /admin/kv/detect`: which candidate schemes' keys the store holds for
 * these prompts. One lookup asks every candidate's first key, a second asks all keys of those
 * present, and the schemes are ranked (src/hashing/detect_report.ts).
 */
export async function detectKeySchemes(request: DetectRequest): Promise<DetectResult> {
  const now = request.now ?? (() => performance.now());
  const deadlineMs = request.deadlineMs ?? 1_500;
  const candidates = detectCandidates(
    request.configured,
    request.model,
    request.prompts,
    request.sampleKeys,
  );
  const result: DetectResult = {
    asked: true,
    candidates: candidates.length,
    probedKeys: 0,
    survivors: 0,
    confirmedKeys: 0,
    probeMs: 0,
    confirmMs: 0,
    schemes: [],
  };
  const probeKeys = candidates.flatMap((c) => c.firstKeys.filter((k) => k !== undefined));
  let started = now();
  const probe = await request.client.lookup(probeKeys, { deadlineMs });
  result.probeMs = now() - started;
  result.probedKeys = probe.keysQueried;
  if (!answered(probe)) return { ...result, asked: false, error: probe.error };
  const survivors = candidates
    .filter((c) => c.firstKeys.some((k) => k !== undefined && present(probe, k)))
    .slice(0, request.maxSurvivors ?? 64);
  result.survivors = survivors.length;
  if (survivors.length === 0) return result;

  const chunkKeys = survivors.map((c) => schemeChunkKeys(c.options, request.prompts));
  started = now();
  const confirm = await request.client.lookup(chunkKeys.flat(3), { deadlineMs });
  result.confirmMs = now() - started;
  result.confirmedKeys = confirm.keysQueried;
  if (!answered(confirm)) return { ...result, asked: false, error: confirm.error };
  const found = survivors.map((c, i) => ({
    ...c.options,
    presentChunks: chunkKeys[i].reduce((sum, prompt) => sum + prefixChunks(confirm, prompt), 0),
  }));
  result.schemes = rankDetected(found.filter((s) => s.presentChunks > 0), request.configured);
  return result;
}

/** Every chunk's keys of every prompt under one scheme. */
function schemeChunkKeys(
  options: KeySchemeOptions,
  prompts: readonly (readonly number[])[],
): string[][][] {
  const scheme = createKeyScheme(options);
  return prompts.map((p) => scheme.chunkKeys(p));
}

/** Consecutive chunks from 0 whose keys are all present. */
function prefixChunks(lookup: LookupResult, chunks: string[][]): number {
  let n = 0;
  while (n < chunks.length && chunks[n].every((k) => present(lookup, k))) n++;
  return n;
}

function present(lookup: LookupResult, key: string): boolean {
  return lookup.locations.get(key)?.present === true;
}

function answered(lookup: LookupResult): boolean {
  return lookup.outcome === "ok" || lookup.outcome === "skipped";
}

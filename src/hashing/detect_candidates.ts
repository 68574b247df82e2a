import { chainCandidates, type ChainChoice, chainFitsLayout } from "./detect_chains.ts";
import { layoutCandidates, type LayoutChoice } from "./detect_layouts.ts";
import { createKeyFormatter, type KeyFormatter } from "./key_format.ts";
import { createKeyScheme } from "./key_scheme.ts";
import type { KeySchemeOptions } from "./types.ts";

/** One scheme `keys --detect` asks about, with its first key for each prompt. */
export interface DetectCandidate {
  options: KeySchemeOptions;
  /** Per prompt: chunk 0's primary key, or undefined when the prompt has no full chunk. */
  firstKeys: (string | undefined)[];
}

/**
 * Every candidate scheme (chains × layouts that fit, docs/compat.md §2-3) with its first key per
 * prompt; schemes whose keys are the same text (e.g. model spellings vLLM reduces to a
 * basename) are kept once, the first listed (the configured one first). Pure.
 */
export function detectCandidates(
  configured: KeySchemeOptions,
  model: string,
  prompts: readonly (readonly number[])[],
  sampleKeys: readonly string[] = [],
): DetectCandidate[] {
  const longest = Math.max(0, ...prompts.map((p) => p.length));
  const layouts = layoutCandidates(configured, model, sampleKeys);
  const formatters = new Map<string, KeyFormatter | null>();
  const found = new Map<string, DetectCandidate>();
  for (const chain of chainCandidates(configured, longest)) {
    const hashes = firstHashes(chain, prompts);
    if (hashes === undefined) continue;
    for (const layout of layouts) {
      if (!chainFitsLayout(chain, layout)) continue;
      const formatter = formatterFor(formatters, layout, chain);
      if (formatter === null) continue;
      const firstKeys = hashes.map((h) => (h === undefined ? undefined : formatter.keys([h])[0]));
      const id = firstKeys.join("\n");
      if (!found.has(id)) found.set(id, { options: { ...chain, ...layout }, firstKeys });
    }
  }
  return [...found.values()];
}

/** Chunk 0's hash of each prompt under a chain (undefined where a prompt is too short). */
function firstHashes(
  chain: ChainChoice,
  prompts: readonly (readonly number[])[],
): (string | undefined)[] | undefined {
  try {
    const scheme = createKeyScheme({ ...chain, keyFormat: "{hex}" });
    return prompts.map((p) =>
      p.length < chain.chunkSize ? undefined : scheme.blockHashes(p.slice(0, chain.chunkSize))[0]
    );
  } catch {
    return undefined; // a chain these tokens cannot go through (sha256_hex takes uint32 only)
  }
}

function formatterFor(
  cache: Map<string, KeyFormatter | null>,
  layout: LayoutChoice,
  chain: ChainChoice,
): KeyFormatter | null {
  const id = `${chain.hash}\n${JSON.stringify(layout)}`;
  let formatter = cache.get(id);
  if (formatter === undefined) {
    try {
      formatter = createKeyFormatter({ ...layout, hash: chain.hash });
    } catch {
      formatter = null; // e.g. a configured layout that needs options a guess lacks
    }
    cache.set(id, formatter);
  }
  return formatter;
}

import type { KeySchemeOptions } from "./types.ts";

/** A scheme found in the store: createKeyScheme() options plus its chunks present from key 0. */
export type DetectedScheme = KeySchemeOptions & { presentChunks: number };

const CHAIN_FIELDS = ["hash", "seed", "chunkSize", "hashBlockSize", "keyFormat"] as const;

/**
 * Best first: most prompt tokens covered from key 0 (chunks × chunk size), then most chunks,
 * then the fewest options differing from the configured scheme. Pure.
 */
export function rankDetected(
  found: readonly DetectedScheme[],
  configured: KeySchemeOptions,
): DetectedScheme[] {
  const covered = (s: DetectedScheme) => s.presentChunks * s.chunkSize;
  return [...found].sort((a, b) =>
    covered(b) - covered(a) || b.presentChunks - a.presentChunks ||
    differences(a, configured) - differences(b, configured)
  );
}

/** How many options of `scheme` differ from the configured ones. */
function differences(scheme: KeySchemeOptions, configured: KeySchemeOptions): number {
  const names = new Set([...Object.keys(scheme), ...Object.keys(configured)]);
  names.delete("presentChunks");
  const of = (o: object, name: string) => JSON.stringify((o as Record<string, unknown>)[name]);
  return [...names].filter((name) => of(scheme, name) !== of(configured, name)).length;
}

/** One line naming a scheme's options, e.g. `sha256_cbor seed "0" chunk 256 llumnix`. */
export function describeScheme(scheme: KeySchemeOptions): string {
  const { hash, seed, chunkSize, hashBlockSize, keyFormat } = scheme;
  const parts: string[] = [hash];
  if (seed !== undefined) parts.push(`seed ${JSON.stringify(seed)}`);
  parts.push(`chunk ${chunkSize}`);
  if (hashBlockSize !== undefined) parts.push(`hashBlockSize ${hashBlockSize}`);
  parts.push(String(keyFormat));
  const params = keyParamsOf(scheme);
  if (Object.keys(params).length > 0) parts.push(JSON.stringify(params));
  return parts.join(" ");
}

/**
 * The model config's `kv` block for a scheme, ready to paste (JSON, which YAML reads too); the
 * store fields are kept, `keyParams.model` is left out when it is the model's own name.
 */
export function kvBlockText(
  scheme: KeySchemeOptions,
  store: { url?: string | readonly string[]; modelName: string },
): string {
  const params = keyParamsOf(scheme);
  if (params.model === store.modelName) delete params.model;
  const block: Record<string, unknown> = { store: "mooncake", url: store.url };
  for (const name of CHAIN_FIELDS) block[name] = scheme[name];
  if (Object.keys(params).length > 0) block.keyParams = params;
  return `"kv": ${JSON.stringify(block, null, 2)}`;
}

/** The options that go under `kv.keyParams`. */
function keyParamsOf(scheme: KeySchemeOptions): Record<string, unknown> {
  const skip = new Set<string>([
    ...CHAIN_FIELDS,
    "presentChunks",
    "saveUnfullChunk",
    "requireAllRanks",
    "extraKeys", // a kv field, not a key parameter
  ]);
  return Object.fromEntries(
    Object.entries(scheme).filter(([name, value]) => !skip.has(name) && value !== undefined),
  );
}

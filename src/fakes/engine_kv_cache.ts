/**
 * A fake engine's own prefix cache: chunk keys computed with the engine's own key scheme (its
 * seed, chunk size and layout, which may differ from the router's), an LRU of the chunks it
 * holds, and the truthful `cached_tokens` that follows (whole chunks from token 0). Written
 * chunks can be published (e.g. to a fake Mooncake master on the engine's KV host).
 */
import { createKeyScheme } from "../hashing/key_scheme.ts";
import type { KeyScheme, KeySchemeOptions } from "../hashing/types.ts";
import type { OpenAiBody } from "./openai_body.ts";

export interface EngineKvCacheOptions {
  /** The engine's hashing (default: the test harness's router: sha256_cbor, seed "0", llumnix). */
  scheme?: Partial<KeySchemeOptions>;
  /** Prompt tokens of a body (default: token-id prompts; anything else holds nothing). */
  tokensOf?: (body: OpenAiBody) => number[];
  /** Each chunk key the engine writes after a prefill (e.g. `master.put(key, host)`). */
  publish?: (key: string) => void;
  /** Each chunk key it evicts. */
  unpublish?: (key: string) => void;
  /** Chunks held before the least recently used is evicted (default 4096). */
  capacityChunks?: number;
}

const DEFAULT_SCHEME: KeySchemeOptions = {
  hash: "sha256_cbor",
  seed: "0",
  chunkSize: 16,
  keyFormat: "llumnix",
};

export class EngineKvCache {
  readonly #options: EngineKvCacheOptions;
  #scheme: KeyScheme;
  /** Chunk keys held, least recently used first. */
  readonly held = new Map<string, true>();

  constructor(options: EngineKvCacheOptions = {}) {
    this.#options = options;
    this.#scheme = createKeyScheme({ ...DEFAULT_SCHEME, ...options.scheme });
  }

  get chunkSize(): number {
    return this.#scheme.options.chunkSize;
  }

  /** The engine restarts with other hashing: its cache starts empty. */
  restart(scheme: Partial<KeySchemeOptions>): void {
    for (const key of this.held.keys()) this.#options.unpublish?.(key);
    this.held.clear();
    this.#scheme = createKeyScheme({ ...DEFAULT_SCHEME, ...scheme });
  }

  /** Tokens of the prompt held from token 0, whole chunks (refreshing their LRU position). */
  cachedTokens(body: OpenAiBody): number {
    const tokens = this.#tokensOf(body);
    const keys = this.#scheme.keys(tokens);
    let chunks = 0;
    while (chunks < keys.length && this.held.has(keys[chunks])) chunks++;
    for (const key of keys.slice(0, chunks)) this.#touch(key);
    return Math.min(tokens.length, chunks * this.chunkSize);
  }

  /** After a prefill: every full chunk of the prompt is held and published. */
  write(body: OpenAiBody): void {
    for (const key of this.#scheme.keys(this.#tokensOf(body))) {
      this.#touch(key);
      this.#options.publish?.(key);
    }
    const capacity = this.#options.capacityChunks ?? 4096;
    while (this.held.size > capacity) {
      const oldest = this.held.keys().next().value!;
      this.held.delete(oldest);
      this.#options.unpublish?.(oldest);
    }
  }

  #touch(key: string): void {
    this.held.delete(key);
    this.held.set(key, true);
  }

  #tokensOf(body: OpenAiBody): number[] {
    if (this.#options.tokensOf) return this.#options.tokensOf(body);
    const prompt = (body as { prompt?: unknown }).prompt;
    return Array.isArray(prompt) && prompt.every((t) => typeof t === "number") ? prompt : [];
  }
}

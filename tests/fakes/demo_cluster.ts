/**
 * A small simulated cluster that behaves like the real thing end to end: N fake vLLM engines
 * that tokenize and hash prompts exactly as the router does, keep their own KV cache (an LRU of
 * chunk keys), charge prefill time only for what they do not hold, and write every prefilled
 * chunk into a fake Mooncake master pinned to their own host (`local_first` allocation).
 * Used by the demo (`deno task demo`) and by end-to-end tests.
 */
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import type { KeyScheme } from "../../src/hashing/types.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import type { PromptTokenizer } from "../../src/tokenize/types.ts";
import { type FakeEngine, type OpenAiBody, startFakeEngine } from "./fake_engine.ts";
import { type FakeMooncakeMaster, startFakeMooncakeMaster } from "./fake_mooncake_master.ts";

export interface DemoClusterOptions {
  engines?: number;
  model?: string;
  /** Wall seconds per engine second (default 0.1: a 2.6k-token cold prefill takes ~30 ms). */
  timeScale?: number;
  chunkSize?: number;
  /** Chunks each engine keeps in its KV cache (default 4096 = 1M tokens at 256). */
  cacheChunks?: number;
  /** A tokenizer directory or builtin name (default builtin:qwen3). */
  tokenizer?: string;
}

export interface DemoEngine {
  id: string;
  kvHost: string;
  engine: FakeEngine;
  /** Chunk keys this engine holds, least recently used first. */
  cache: Map<string, true>;
}

export interface DemoCluster {
  model: string;
  master: FakeMooncakeMaster;
  engines: DemoEngine[];
  tokenizer: PromptTokenizer;
  keyScheme: KeyScheme;
  chunkSize: number;
  /** Router config (JSON form) pointing at this cluster. */
  routerConfig(
    overrides?: { port?: number; policy?: string; minPromptTokens?: number },
  ): Record<string, unknown>;
  close(): Promise<void>;
}

/** Prompt tokens of an OpenAI body, as the engine computes them (docs/compat.md §1). */
export function promptTokensOf(tokenizer: PromptTokenizer, body: OpenAiBody): number[] {
  const b = body as Record<string, unknown>;
  if (Array.isArray(b.messages)) {
    return tokenizer.encodeChat(b.messages as never[], {
      tools: b.tools as unknown[] | undefined,
      chatTemplateKwargs: b.chat_template_kwargs as Record<string, unknown> | undefined,
    });
  }
  const prompt = Array.isArray(b.prompt) ? b.prompt[0] : b.prompt;
  if (typeof prompt === "number") return b.prompt as number[];
  if (Array.isArray(prompt)) return prompt as number[];
  return tokenizer.encode(String(prompt ?? ""), { addSpecialTokens: true });
}

export async function startDemoCluster(options: DemoClusterOptions = {}): Promise<DemoCluster> {
  const model = options.model ?? "qwen3";
  const chunkSize = options.chunkSize ?? 256;
  const capacity = options.cacheChunks ?? 4096;
  const tokenizerDir = options.tokenizer ?? "builtin:qwen3";
  const tokenizer = await loadTokenizer(tokenizerDir);
  const keyScheme = createKeyScheme({
    hash: "sha256_cbor",
    seed: "0",
    chunkSize,
    keyFormat: "llumnix",
  });
  const master = await startFakeMooncakeMaster();
  const tokensCache = new WeakMap<object, number[]>();
  const tokensOf = (body: OpenAiBody) => {
    let tokens = tokensCache.get(body as object);
    if (!tokens) {
      tokens = promptTokensOf(tokenizer, body);
      tokensCache.set(body as object, tokens);
    }
    return tokens;
  };

  const engines: DemoEngine[] = [];
  const count = options.engines ?? 4;
  for (let i = 0; i < count; i++) {
    const id = `gpu-${String.fromCharCode(97 + i)}`;
    const kvHost = `10.0.0.${i + 1}`;
    const endpoint = `${kvHost}:15000`;
    const cache = new Map<string, true>();
    const engine = await startFakeEngine({
      id,
      model,
      flavour: "vllm",
      timeScale: options.timeScale ?? 0.1,
      countTokens: (body) => tokensOf(body).length,
      cachedTokens: (body) => {
        const keys = keyScheme.keys(tokensOf(body));
        let held = 0;
        while (held < keys.length && cache.has(keys[held])) held++;
        for (let k = 0; k < held; k++) {
          cache.delete(keys[k]);
          cache.set(keys[k], true); // refresh LRU position
        }
        return Math.min(tokensOf(body).length, held * chunkSize);
      },
      onPrefilled: (body) => {
        for (const key of keyScheme.keys(tokensOf(body))) {
          cache.delete(key);
          cache.set(key, true);
          master.put(key, endpoint);
        }
        while (cache.size > capacity) {
          const oldest = cache.keys().next().value!;
          cache.delete(oldest);
          master.remove(oldest);
        }
      },
    });
    engines.push({ id, kvHost, engine, cache });
  }

  return {
    model,
    master,
    engines,
    tokenizer,
    keyScheme,
    chunkSize,
    routerConfig(overrides = {}) {
      return {
        listen: { host: "127.0.0.1", port: overrides.port ?? 0 },
        models: [{
          name: model,
          tokenizer: { path: tokenizerDir },
          kv: {
            store: "mooncake",
            url: master.url,
            hash: "sha256_cbor",
            seed: "0",
            chunkSize,
            keyFormat: "llumnix",
            minPromptTokens: overrides.minPromptTokens ?? 1024,
            // Generous: the demo runs engines, store and router in one process on shared cores,
            // so a burst's tokenization can hold a lookup's answer back for tens of ms.
            timeoutMs: 250,
          },
          policy: overrides.policy ?? "cache_aware",
          health: { intervalMs: 1000, timeoutMs: 500 },
          instances: engines.map((e) => ({ id: e.id, url: e.engine.url, kvHost: e.kvHost })),
        }],
      };
    },
    async close() {
      await Promise.all([...engines.map((e) => e.engine.close()), master.close()]);
    },
  };
}

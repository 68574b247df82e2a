/**
 * A small simulated cluster that behaves like the real thing end to end: N fake vLLM engines
 * that tokenize and hash prompts exactly as the router does, keep their own KV cache (an LRU of
 * chunk keys), charge prefill time only for what they do not hold, and write every prefilled
 * chunk into a fake Mooncake master pinned to their own host (`local_first` allocation).
 * Used by the demo (`deno task demo`) and by end-to-end tests.
 *
 * With `pd` the cluster is disaggregated: `pd.prefill` prefill and `pd.decode` decode fakes of one
 * P/D protocol (docs/compat.md §7), meeting in a registry of their own. The prefill engines hold the
 * KV cache and write the store as above; the decode engines only receive KV.
 */
import { createKeyScheme } from "../hashing/key_scheme.ts";
import type { KeyScheme } from "../hashing/types.ts";
import { loadTokenizer } from "../tokenize/load_tokenizer.ts";
import type { PromptTokenizer } from "../tokenize/types.ts";
import { type FakeEngine, type OpenAiBody, startFakeEngine } from "./fake_engine.ts";
import { type FakeMooncakeMaster, startFakeMooncakeMaster } from "./fake_mooncake_master.ts";
import type { PdProtocol, PdRole } from "./pd_protocol.ts";
import { PdRegistry } from "./pd_registry.ts";

export interface DemoPdOptions {
  protocol: PdProtocol;
  /** Prefill instances (default 2). */
  prefill?: number;
  /** Decode instances (default 2). */
  decode?: number;
  /** The fakes' P/D wait/lease timeout, wall ms (default: theirs). */
  timeoutMs?: number;
}

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
  /** Prefill/decode disaggregation instead of `engines` neutral engines. */
  pd?: DemoPdOptions;
}

export interface DemoEngine {
  id: string;
  kvHost: string;
  engine: FakeEngine;
  /** Chunk keys this engine holds, least recently used first. */
  cache: Map<string, true>;
  /** P/D clusters: the engine's role. */
  role?: PdRole;
  /** P/D prefill of vLLM Mooncake / SGLang: its bootstrap server's port. */
  bootstrapPort?: number;
}

export interface DemoCluster {
  model: string;
  master: FakeMooncakeMaster;
  engines: DemoEngine[];
  tokenizer: PromptTokenizer;
  keyScheme: KeyScheme;
  chunkSize: number;
  /** P/D clusters: the protocol and the registry its fakes meet in. */
  pd?: { protocol: PdProtocol; registry: PdRegistry };
  /**
   * Router config (JSON form) pointing at this cluster. A P/D cluster adds the model's
   * `disaggregation: {protocol}` and each instance's `role` (and `bootstrapPort` where the
   * prefill runs a bootstrap server; `engine: "sglang"` for SGLang).
   */
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
  const pdOptions = options.pd;
  const registry = pdOptions ? new PdRegistry() : undefined;
  const plan: { id: string; role?: PdRole }[] = [];
  if (pdOptions) {
    const letter = (i: number) => String.fromCharCode(97 + i);
    for (let i = 0; i < (pdOptions.prefill ?? 2); i++) {
      plan.push({ id: `prefill-${letter(i)}`, role: "prefill" });
    }
    for (let i = 0; i < (pdOptions.decode ?? 2); i++) {
      plan.push({ id: `decode-${letter(i)}`, role: "decode" });
    }
  } else {
    const count = options.engines ?? 4;
    for (let i = 0; i < count; i++) plan.push({ id: `gpu-${String.fromCharCode(97 + i)}` });
  }
  for (const [i, { id, role }] of plan.entries()) {
    const kvHost = `10.0.0.${i + 1}`;
    const endpoint = `${kvHost}:15000`;
    const cache = new Map<string, true>();
    const engine = await startFakeEngine({
      id,
      model,
      flavour: pdOptions?.protocol === "sglang" ? "sglang" : "vllm",
      pd: pdOptions && role
        ? { protocol: pdOptions.protocol, role, registry, timeoutMs: pdOptions.timeoutMs }
        : undefined,
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
    const entry: DemoEngine = { id, kvHost, engine, cache };
    if (role) entry.role = role;
    if (engine.pd?.bootstrapPort !== undefined) entry.bootstrapPort = engine.pd.bootstrapPort;
    engines.push(entry);
  }

  return {
    model,
    master,
    engines,
    tokenizer,
    keyScheme,
    chunkSize,
    ...(pdOptions && registry ? { pd: { protocol: pdOptions.protocol, registry } } : {}),
    routerConfig(overrides = {}) {
      const instance = (e: DemoEngine) => {
        const out: Record<string, unknown> = { id: e.id, url: e.engine.url, kvHost: e.kvHost };
        if (!pdOptions) return out;
        out.role = e.role;
        if (e.bootstrapPort !== undefined) out.bootstrapPort = e.bootstrapPort;
        if (pdOptions.protocol === "sglang") out.engine = "sglang";
        return out;
      };
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
          policy: overrides.policy ?? "affinity_ttft",
          health: { intervalMs: 1000, timeoutMs: 500 },
          ...(pdOptions ? { disaggregation: { protocol: pdOptions.protocol } } : {}),
          instances: engines.map(instance),
        }],
      };
    },
    async close() {
      await Promise.all([...engines.map((e) => e.engine.close()), master.close()]);
    },
  };
}

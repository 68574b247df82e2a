/**
 * A router in front of real vLLM engines whose KV events are its only view of their caches: no
 * store and no predicted index, vLLM's default sha256 chain, the CPU build's 128-token blocks.
 */
import { createRouter, type Router } from "../../routes/app.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { REAL } from "./real_env.ts";
import { CPU_BLOCK_SIZE, type VllmEngine } from "./vllm_engine.ts";

export function eventsOnlyRouter(
  engines: VllmEngine[],
  ends: { pub: string; replay: string }[],
): Promise<Router> {
  return createRouter(
    resolveConfig({
      listen: { port: 0 },
      models: [{
        name: REAL.modelName,
        tokenizer: { path: REAL.model },
        kv: {
          store: "none",
          hash: "sha256",
          chunkSize: CPU_BLOCK_SIZE,
          keyFormat: "{hex}",
          minPromptTokens: CPU_BLOCK_SIZE,
          predictedIndex: { enabled: false },
        },
        policy: "cache_aware",
        health: { intervalMs: 1_000, timeoutMs: 2_000 },
        instances: engines.map((engine, i) => ({
          id: `v${i}`,
          url: engine.url,
          kvEvents: { endpoint: ends[i].pub, replayEndpoint: ends[i].replay },
        })),
      }],
    }),
    { log: () => {} },
  );
}

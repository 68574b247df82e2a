/** The simulator's test settings and trace, shared by its tests (not a test file). */
import { DEFAULT_DECODE_MODEL } from "../../src/scheduling/decode_model.ts";
import { MOONCAKE_PREFILL_MODEL } from "../../src/scheduling/prefill_model.ts";
import { resolveTtftParams } from "../../src/scheduling/registry.ts";
import type { SimConfig } from "../../src/sim/simulator.ts";
import { parseMooncakeTrace, type TraceRequest } from "../../src/sim/trace.ts";

/** The first `limit` requests of the conversation trace (tests/data/conversation_trace.jsonl). */
export async function conversationTrace(limit: number): Promise<TraceRequest[]> {
  const url = new URL("../data/conversation_trace.jsonl", import.meta.url);
  return parseMooncakeTrace(await Deno.readTextFile(url), { limit });
}

/**
 * Eight instances at speed 1 with Mooncake's prefill model, 512-token blocks, 6,000 of them per
 * cache, the store's pool as planned; each test overrides what it is about.
 */
export function simTestConfig(overrides: Partial<SimConfig> = {}): SimConfig {
  return {
    instances: 8,
    cacheBlocks: 6000,
    chunkTokens: 8192,
    blockTokens: 512,
    speed: 1,
    seed: 1,
    sloTtftS: 30,
    sloTbtS: 0.1,
    kvPool: "planned",
    ttft: resolveTtftParams(),
    engineModel: MOONCAKE_PREFILL_MODEL,
    heterogeneity: 0,
    refine: true,
    decodeInstances: 0,
    decodeModel: DEFAULT_DECODE_MODEL,
    loadThresholdTokens: 240_000,
    timelinePoints: 50,
    ...overrides,
  };
}

/** The P/D simulator's test cluster settings, shared by the P/D tests (not a test file). */
import { maxBatchWithin } from "../../src/scheduling/decode_model.ts";
import { MOONCAKE_PREFILL_MODEL } from "../../src/scheduling/prefill_model.ts";
import { resolveTtftParams } from "../../src/scheduling/registry.ts";
import type { PdConfig } from "../../src/sim/pd_simulator.ts";
import type { TraceRequest } from "../../src/sim/trace.ts";

/** Decode step s = 0.03 + 0.0005·batch + 4e-8·KV tokens of the batch. */
export const TEST_DECODE_MODEL = { baseS: 0.03, perRequestS: 0.0005, perKvTokenS: 4e-8 };

/** A P/D run's config at speed 1.6, batches sized to the 50 ms TBT SLO at the trace's context. */
export function pdTestConfig(
  trace: readonly TraceRequest[],
  overrides: Partial<PdConfig> = {},
): PdConfig {
  const meanContext = trace.reduce((s, r) => s + r.inputLength + r.outputLength / 2, 0) /
    trace.length;
  const routerDecodeModel = { ...TEST_DECODE_MODEL, kvTokensPerRequest: Math.round(meanContext) };
  return {
    cacheBlocks: 6000,
    chunkTokens: 8192,
    blockTokens: 512,
    speed: 1.6,
    seed: 1,
    sloTtftS: 10,
    sloTbtS: 0.05,
    kvPool: "planned",
    ttft: resolveTtftParams(),
    engineModel: MOONCAKE_PREFILL_MODEL,
    heterogeneity: 0,
    refine: true,
    timelinePoints: 400,
    engineDecodeModel: TEST_DECODE_MODEL,
    routerDecodeModel,
    decodePolicy: "least_running",
    decodeMaxBatch: maxBatchWithin(routerDecodeModel, 0.05),
    decodeKvCapacityTokens: 1_500_000,
    pdTransferBytesPerS: 85e9,
    meanDecodeS: 10,
    ...overrides,
  };
}

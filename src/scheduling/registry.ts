import { cacheAware } from "./policies/cache_aware.ts";
import { dynamoKv } from "./policies/dynamo_kv.ts";
import { kvHitLen } from "./policies/kv_hit_len.ts";
import { leastLoad } from "./policies/least_load.ts";
import { llmdDefault } from "./policies/llmd_default.ts";
import { mooncakeTtft } from "./policies/mooncake_ttft.ts";
import { powerOfTwo } from "./policies/power_of_two.ts";
import { randomPolicy } from "./policies/random.ts";
import { roundRobin } from "./policies/round_robin.ts";
import { sglangCacheAware } from "./policies/sglang_cache_aware.ts";
import { DEFAULT_TTFT_PARAMS, type TtftModelParams } from "./ttft_estimate.ts";
import type { Policy, PrefillModelCoefficients } from "./types.ts";

export const POLICY_NAMES = [
  "round_robin",
  "random",
  "least_load",
  "cache_aware",
  "kv_hit_len",
  "power_of_two",
  "mooncake_ttft",
  "dynamo_kv",
  "llmd_default",
  "sglang_cache_aware",
] as const;

export type PolicyName = typeof POLICY_NAMES[number];

/** Every knob any policy reads; each policy ignores the ones it does not use. */
export interface PolicyParams extends Partial<TtftModelParams> {
  /** cache_aware / kv_hit_len: Llumnix's prefill-load filter in tokens (off when unset). */
  loadFilterTokens?: number;
  /** dynamo_kv: weight of the prefill blocks against the decode blocks (default 1). */
  overlapScoreWeight?: number;
  /** dynamo_kv: softmax sampling temperature, 0 for the lowest cost (default 0). */
  routerTemperature?: number;
  /** dynamo_kv / llmd_default: KV tokens a decoding request is taken to hold (default 8192). */
  runningRequestTokens?: number;
  /** llmd_default: scorer weights (defaults 3, 2, 2) and the KV capacity in tokens (1.5M). */
  prefixCacheWeight?: number;
  queueWeight?: number;
  kvCacheUtilizationWeight?: number;
  kvCapacityTokens?: number;
  /** sglang_cache_aware: match rate for cache routing and the imbalance thresholds. */
  cacheThreshold?: number;
  balanceAbsThreshold?: number;
  balanceRelThreshold?: number;
}

export function isPolicyName(name: string): name is PolicyName {
  return (POLICY_NAMES as readonly string[]).includes(name);
}

/** Builds a policy by name; unknown names and bad parameters throw, listing what is valid. */
export function createPolicy(name: string, params: PolicyParams = {}): Policy {
  if (!isPolicyName(name)) {
    throw new Error(
      `Unknown scheduling policy "${name}": use one of ${POLICY_NAMES.join(", ")}.`,
    );
  }
  const problems = validateParams(params);
  if (problems.length > 0) {
    throw new Error(`Invalid parameters for policy "${name}": ${problems.join("; ")}.`);
  }
  switch (name) {
    case "round_robin":
      return roundRobin();
    case "random":
      return randomPolicy();
    case "least_load":
      return leastLoad();
    case "cache_aware":
      return cacheAware({ loadFilterTokens: params.loadFilterTokens });
    case "kv_hit_len":
      return kvHitLen({ loadFilterTokens: params.loadFilterTokens });
    case "power_of_two":
      return powerOfTwo();
    case "mooncake_ttft":
      return mooncakeTtft(resolveTtftParams(params));
    case "dynamo_kv":
      return dynamoKv({
        overlapScoreWeight: params.overlapScoreWeight,
        routerTemperature: params.routerTemperature,
        runningRequestTokens: params.runningRequestTokens,
      });
    case "llmd_default":
      return llmdDefault({
        prefixCacheWeight: params.prefixCacheWeight,
        queueWeight: params.queueWeight,
        kvCacheUtilizationWeight: params.kvCacheUtilizationWeight,
        kvCapacityTokens: params.kvCapacityTokens,
        runningRequestTokens: params.runningRequestTokens,
      });
    case "sglang_cache_aware":
      return sglangCacheAware({
        cacheThreshold: params.cacheThreshold,
        balanceAbsThreshold: params.balanceAbsThreshold,
        balanceRelThreshold: params.balanceRelThreshold,
      });
  }
}

/** Defaults filled in; the prefill model is copied so callers cannot mutate a shared one. */
export function resolveTtftParams(params: Partial<TtftModelParams> = {}): TtftModelParams {
  return {
    prefillModel: { ...(params.prefillModel ?? DEFAULT_TTFT_PARAMS.prefillModel) },
    kvBytesPerToken: params.kvBytesPerToken ?? DEFAULT_TTFT_PARAMS.kvBytesPerToken,
    transferBytesPerS: params.transferBytesPerS ?? DEFAULT_TTFT_PARAMS.transferBytesPerS,
    balancingThreshold: params.balancingThreshold ?? DEFAULT_TTFT_PARAMS.balancingThreshold,
    queueReferenceTokens: params.queueReferenceTokens ?? DEFAULT_TTFT_PARAMS.queueReferenceTokens,
  };
}

function validateParams(params: PolicyParams): string[] {
  const problems: string[] = [];
  const positive = (key: string, value: number | undefined) => {
    if (value !== undefined && !(Number.isFinite(value) && value > 0)) {
      problems.push(`${key} must be a positive number (got ${value})`);
    }
  };
  positive("kvBytesPerToken", params.kvBytesPerToken);
  positive("transferBytesPerS", params.transferBytesPerS);
  positive("queueReferenceTokens", params.queueReferenceTokens);
  positive("loadFilterTokens", params.loadFilterTokens);
  positive("runningRequestTokens", params.runningRequestTokens);
  positive("kvCapacityTokens", params.kvCapacityTokens);
  const atLeast = (key: string, value: number | undefined, low: number, high = Infinity) => {
    if (value !== undefined && !(Number.isFinite(value) && value >= low && value <= high)) {
      const range = high === Infinity ? `at least ${low}` : `between ${low} and ${high}`;
      problems.push(`${key} must be a number ${range} (got ${value})`);
    }
  };
  atLeast("overlapScoreWeight", params.overlapScoreWeight, 0);
  atLeast("routerTemperature", params.routerTemperature, 0);
  atLeast("prefixCacheWeight", params.prefixCacheWeight, 0);
  atLeast("queueWeight", params.queueWeight, 0);
  atLeast("kvCacheUtilizationWeight", params.kvCacheUtilizationWeight, 0);
  atLeast("cacheThreshold", params.cacheThreshold, 0, 1);
  atLeast("balanceAbsThreshold", params.balanceAbsThreshold, 0);
  atLeast("balanceRelThreshold", params.balanceRelThreshold, 0);
  if (
    params.balancingThreshold !== undefined &&
    !(Number.isFinite(params.balancingThreshold) && params.balancingThreshold >= 1)
  ) {
    problems.push(
      `balancingThreshold must be a ratio of at least 1 (got ${params.balancingThreshold})`,
    );
  }
  if (params.prefillModel !== undefined) {
    problems.push(...validatePrefillModel(params.prefillModel));
  }
  return problems;
}

function validatePrefillModel(model: PrefillModelCoefficients): string[] {
  const problems: string[] = [];
  for (const key of ["linear", "quadratic", "cachedLinear", "constant"] as const) {
    const value = model[key];
    if (value === undefined && (key === "cachedLinear" || key === "constant")) continue;
    if (!(typeof value === "number" && Number.isFinite(value) && value >= 0)) {
      problems.push(`prefillModel.${key} must be a non-negative number (got ${value})`);
    }
  }
  return problems;
}

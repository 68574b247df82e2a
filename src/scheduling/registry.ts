/**
 * The scheduling policies by name: the built-in ones (the router's and the peers' as their
 * sources define them) and any a library user registers. Each declares its own parameters; every
 * policy also takes the TTFT model's (TTFT_PARAMS), which the planning step predicts with.
 * Unknown names and parameters are refused with what is valid.
 */
import { z } from "zod";
import type { PolicyFactory } from "./policy_factory.ts";
import { affinityTtftPolicy } from "./policies/affinity_ttft.ts";
import { cacheAwarePolicy } from "./policies/cache_aware.ts";
import { dynamoKvPolicy } from "./policies/dynamo_kv.ts";
import { kvHitLenPolicy } from "./policies/kv_hit_len.ts";
import { leastLoadPolicy } from "./policies/least_load.ts";
import { llmdDefaultPolicy } from "./policies/llmd_default.ts";
import { mooncakeTtftPolicy } from "./policies/mooncake_ttft.ts";
import { powerOfTwoPolicy } from "./policies/power_of_two.ts";
import { randomPolicyFactory } from "./policies/random.ts";
import { roundRobinPolicy } from "./policies/round_robin.ts";
import { sglangCacheAwarePolicy } from "./policies/sglang_cache_aware.ts";
import { DEFAULT_TTFT_PARAMS, type TtftModelParams } from "./ttft_estimate.ts";
import type { Policy } from "./types.ts";

export type { PolicyFactory } from "./policy_factory.ts";

const BUILT_IN: readonly PolicyFactory[] = [
  roundRobinPolicy,
  randomPolicyFactory,
  leastLoadPolicy,
  cacheAwarePolicy,
  kvHitLenPolicy,
  powerOfTwoPolicy,
  mooncakeTtftPolicy,
  dynamoKvPolicy,
  llmdDefaultPolicy,
  sglangCacheAwarePolicy,
  affinityTtftPolicy,
];

/** The built-in policies' names (a type for them; `policyNames()` adds registered ones). */
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
  "affinity_ttft",
] as const;

export type PolicyName = typeof POLICY_NAMES[number];

/** Parameters as configured: the policy's own and the TTFT model's, by name. */
export type PolicyParams = Record<string, unknown>;

const nonNegative = z.number().min(0);

/** The TTFT model's parameters (ttft_estimate.ts), which every policy takes. */
export const TTFT_PARAMS = z.strictObject({
  prefillModel: z.strictObject({
    linear: nonNegative,
    quadratic: nonNegative,
    cachedLinear: nonNegative.optional(),
    constant: nonNegative.optional(),
  }).optional(),
  kvBytesPerToken: z.number().positive().optional(),
  transferBytesPerS: z.number().positive().optional(),
  /** A pool prefix is loaded only when pool / local exceeds it: a ratio, at least 1. */
  balancingThreshold: z.number().min(1).optional(),
  queueReferenceTokens: z.number().positive().optional(),
});

const factories = new Map<string, PolicyFactory>(BUILT_IN.map((f) => [f.name, f]));

/** Adds a policy (a library user's, or a composition of the shared scorers); names are unique. */
export function registerPolicy(factory: PolicyFactory): void {
  if (factories.has(factory.name)) {
    throw new Error(`A scheduling policy named "${factory.name}" is already registered.`);
  }
  factories.set(factory.name, factory);
}

/** Every policy by name: built-in, then registered. */
export function policyNames(): string[] {
  return [...factories.keys()];
}

export function isPolicyName(name: string): boolean {
  return factories.has(name);
}

/** The factory behind a name (its summary and parameters), undefined for an unknown name. */
export function policyFactoryOf(name: string): PolicyFactory | undefined {
  return factories.get(name);
}

/** The parameter names a policy takes: its own, then the TTFT model's. */
export function policyParamKeys(name: string): string[] {
  const own = factories.get(name)?.params;
  const ownKeys = own instanceof z.ZodObject ? Object.keys(own.shape) : [];
  return [...ownKeys, ...Object.keys(TTFT_PARAMS.shape)];
}

/** Builds a policy by name; unknown names and bad or unknown parameters throw with what is valid. */
export function createPolicy(name: string, params: PolicyParams = {}): Policy {
  const factory = factories.get(name);
  if (!factory) {
    throw new Error(
      `Unknown scheduling policy "${name}": use one of ${policyNames().join(", ")}.`,
    );
  }
  const own: PolicyParams = {};
  const ttft: PolicyParams = {};
  const ttftKeys = new Set(Object.keys(TTFT_PARAMS.shape));
  for (const [key, value] of Object.entries(params)) (ttftKeys.has(key) ? ttft : own)[key] = value;
  const problems = [
    ...issuesOf(factory.params.safeParse(own), name),
    ...issuesOf(TTFT_PARAMS.safeParse(ttft), name),
  ];
  if (problems.length > 0) {
    throw new Error(`Invalid parameters for policy "${name}": ${problems.join("; ")}.`);
  }
  return factory.create(factory.params.parse(own), resolveTtftParams(ttft));
}

/** The parameters a caller holds for several policies, narrowed to what `name` takes. */
export function paramsFor(name: string, params: PolicyParams): PolicyParams {
  const keys = new Set(policyParamKeys(name));
  return Object.fromEntries(Object.entries(params).filter(([key]) => keys.has(key)));
}

function issuesOf(
  result: { success: true } | { success: false; error: z.ZodError },
  name: string,
): string[] {
  if (result.success) return [];
  return result.error.issues.map((issue) => {
    if (issue.code === "unrecognized_keys") {
      return `it takes no parameter ${issue.keys.map((k) => `"${k}"`).join(", ")} (it takes: ${
        policyParamKeys(name).join(", ")
      })`;
    }
    return `${issue.path.join(".") || "params"} ${issue.message}`;
  });
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

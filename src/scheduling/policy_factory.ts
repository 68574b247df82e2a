/**
 * A scheduling policy as the registry (registry.ts) knows it: a name, what it does in a line, the
 * parameters it takes (its own, checked strictly: the config says which keys a policy accepts), and
 * how to build it. Every policy also takes the TTFT model's parameters, which the planning step
 * (prefill_choice.ts) predicts with whatever the policy.
 */
import type { z } from "zod";
import type { TtftModelParams } from "./ttft_estimate.ts";
import type { Policy } from "./types.ts";

export interface PolicyFactory<Params extends Record<string, unknown> = Record<string, unknown>> {
  readonly name: string;
  /** One line for `--help`, errors and the docs. */
  readonly summary: string;
  /** Its own parameters, every one optional (the factory's defaults apply). */
  readonly params: z.ZodType<Params>;
  create(params: Params, ttft: TtftModelParams): Policy;
}

/** A factory as its own type, checked against the shape (a registry holds them all as one type). */
export function policyFactory<Params extends Record<string, unknown>>(
  factory: PolicyFactory<Params>,
): PolicyFactory {
  return factory as unknown as PolicyFactory;
}

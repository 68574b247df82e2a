import { createPolicy, type PolicyParams, resolveTtftParams } from "./registry.ts";
import type { TtftModelParams } from "./ttft_estimate.ts";
import type { Policy, PrefillModelCoefficients } from "./types.ts";

/** A policy as configured: a name, or a name with parameters. */
export type PolicySpec = string | { name: string; params?: Record<string, unknown> };

/** A named policy with the parameters it was built from, so A/B arms can be compared. */
export interface NamedPolicy {
  name: string;
  policy: Policy;
  ttftParams: TtftModelParams;
}

/**
 * A policy from its config form (`"cache_aware"` or `{name, params}`); the model's own prefill
 * model applies unless the policy's parameters carry one. Throws on bad names and parameters.
 */
export function buildPolicy(
  spec: PolicySpec,
  model: { prefillModel?: PrefillModelCoefficients },
): NamedPolicy {
  const name = typeof spec === "string" ? spec : spec.name;
  const params = { ...(typeof spec === "string" ? {} : spec.params) } as PolicyParams;
  if (model.prefillModel && params.prefillModel === undefined) {
    params.prefillModel = model.prefillModel;
  }
  return { name, policy: createPolicy(name, params), ttftParams: resolveTtftParams(params) };
}

/** Checks every model's policy before anything starts, so a typo fails at start. */
export function policyProblems(
  config: { models: { policy: PolicySpec; prefillModel?: PrefillModelCoefficients }[] },
): string[] {
  const problems: string[] = [];
  config.models.forEach((model, m) => {
    try {
      buildPolicy(model.policy, model);
    } catch (error) {
      problems.push(`models[${m}].policy: ${(error as Error).message}`);
    }
  });
  return problems;
}

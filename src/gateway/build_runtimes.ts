import { ConfigError } from "../config/load.ts";
import type { Config } from "../config/schema.ts";
import { policyProblems } from "../scheduling/named_policy.ts";
import { ModelRuntime, type RuntimeDeps } from "./model_runtime.ts";

/**
 * Builds a runtime for every model of `config` (tokenizers already in `deps.tokenizerCache`
 * are reused). Throws a ConfigError listing every model that could not be built, and every
 * problem `validate` finds before that (policies always).
 */
export async function buildRuntimes(
  config: Config,
  deps: RuntimeDeps,
  validate: (config: Config) => string[] = () => [],
): Promise<Map<string, ModelRuntime>> {
  const problems = [...policyProblems(config), ...validate(config)];
  if (problems.length) throw new ConfigError(problems);
  const built = await Promise.allSettled(
    config.models.map((model) => ModelRuntime.create(model, deps)),
  );
  const runtimes = new Map<string, ModelRuntime>();
  const errors: string[] = [];
  built.forEach((result, m) => {
    const name = config.models[m].name;
    if (result.status === "fulfilled") runtimes.set(name, result.value);
    else errors.push(`models[${m}] (${name}): ${(result.reason as Error).message}`);
  });
  if (errors.length) throw new ConfigError(errors);
  return runtimes;
}

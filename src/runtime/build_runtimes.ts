import { ConfigError } from "../config/load.ts";
import type { Config } from "../config/schema.ts";
import { policyProblems } from "../scheduling/named_policy.ts";
import { ModelRuntime, type RuntimeDeps } from "./model_runtime.ts";

/**
 * Builds a runtime for every model of `config` (tokenizers already in `deps.tokenizerCache`
 * are reused). Throws one ConfigError listing every problem: those `validate` finds (policies
 * always) and every model that could not be built (tokenizer files, key scheme).
 */
export async function buildRuntimes(
  config: Config,
  deps: RuntimeDeps,
  validate: (config: Config) => string[] = () => [],
): Promise<Map<string, ModelRuntime>> {
  const problems = [...policyProblems(config), ...validate(config)];
  const built = await Promise.allSettled(
    config.models.map((model) => ModelRuntime.create(model, deps)),
  );
  const runtimes = new Map<string, ModelRuntime>();
  built.forEach((result, m) => {
    const name = config.models[m].name;
    if (result.status === "fulfilled") runtimes.set(name, result.value);
    else {
      const message = (result.reason as Error).message;
      // A bad policy also fails the build: it is listed once, with its field.
      if (!problems.some((p) => p.endsWith(message))) {
        problems.push(`models[${m}] (${name}): ${message}`);
      }
    }
  });
  if (problems.length) throw new ConfigError(problems);
  return runtimes;
}

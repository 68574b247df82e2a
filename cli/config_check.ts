/**
 * `start --check`: everything `start` would refuse a config for, found without listening or
 * contacting anything: the schema and per-model checks, environment values, policies and
 * experiment arms, tokenizer files and key schemes (each model's runtime is built, then dropped).
 */
import { ConfigError, loadConfigFile } from "../src/config/load.ts";
import type { Config } from "../src/config/schema.ts";
import { experimentProblems } from "../src/experiment/experiment_arms.ts";
import { buildRuntimes } from "../src/runtime/build_runtimes.ts";
import type { ModelRuntime } from "../src/runtime/model_runtime.ts";
import { poolLoadsOf } from "../src/config/pool_loads.ts";

export type ConfigCheck = { ok: true; summary: string[] } | { ok: false; problems: string[] };

export async function checkConfigFile(
  path: string,
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): Promise<ConfigCheck> {
  const problems: string[] = [];
  try {
    const config = await loadConfigFile(path, env).catch(async (error) => {
      if (!(error instanceof ConfigError) || !error.problems.every(isUnsetVariable)) throw error;
      // Only environment values are missing: note them and check the rest with stand-ins.
      problems.push(...error.problems);
      return await loadConfigFile(path, (name) => env(name) || `<unset ${name}>`);
    });
    const runtimes = await buildRuntimes(config, checkDeps(), experimentProblems);
    if (problems.length) return { ok: false, problems };
    return { ok: true, summary: summarize(path, config, runtimes) };
  } catch (error) {
    if (error instanceof ConfigError) problems.push(...error.problems);
    else problems.push((error as Error)?.message ?? String(error));
    return { ok: false, problems };
  }
}

function isUnsetVariable(problem: string): boolean {
  return /: environment variable \S+ is not set or empty$/.test(problem);
}

/** What building the runtimes needs; nothing is contacted and nothing logged. */
function checkDeps() {
  return {
    fetch: () => Promise.reject(new Error("start --check contacts nothing")),
    now: () => performance.now(),
    random: Math.random,
    log: () => {},
    tokenizerCache: new Map(),
  };
}

/** One line for the file, one per model: what `start` would serve. */
function summarize(path: string, config: Config, runtimes: Map<string, ModelRuntime>): string[] {
  const lines = [
    `${path}: OK (listen ${config.listen.host}:${config.listen.port}, ` +
    `${config.models.length} model${config.models.length === 1 ? "" : "s"})`,
  ];
  for (const model of config.models) {
    const runtime = runtimes.get(model.name)!;
    const kv = runtime.keyScheme.options;
    const members = `${model.instances.length} instance${model.instances.length === 1 ? "" : "s"}` +
      (model.discovery.length ? ` + ${model.discovery.length} discovery` : "");
    // Whether the engines load from the store themselves is implicit in the key format: say it.
    const store = model.kv.store === "mooncake"
      ? `store ${model.kv.url}${poolLoadsOf(model.kv) ? " (engines load from it)" : ""}`
      : "no store";
    lines.push(
      `  ${model.name}: ${runtime.defaultPolicy.name}, ${members}, tokenizer ${
        model.tokenizer.mode === "local" ? model.tokenizer.path : model.tokenizer.mode
      }, keys ${kv.keyFormat} ${kv.hash} chunk ${kv.chunkSize} seed "${kv.seed}", ${store}`,
    );
  }
  return lines;
}

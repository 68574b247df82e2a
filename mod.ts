/**
 * tidegate: a cache-aware edge router for LLM serving.
 *
 * Library use: `createRouter(config)`, `createKeyScheme(...)`, `loadTokenizer(dir)`, the pure
 * scheduling policies. Command line: `deno run -A mod.ts <start|demo|keys|sim> ...`.
 */
export { loadTokenizer } from "./src/tokenize/load_tokenizer.ts";
export type { LoadedTokenizer } from "./src/tokenize/local_tokenizer.ts";
export { createKeyScheme, hashBlocks, keysFromHashes } from "./src/hashing/key_scheme.ts";
export type {
  ExtraKeys,
  ExtraKeyStyle,
  HashAlgorithm,
  KeyScheme,
  KeySchemeOptions,
} from "./src/hashing/types.ts";
export { createRouter, type Router, type RouterOptions } from "./routes/app.ts";
export { ConfigError, loadConfigFile, parseConfigText, resolveConfig } from "./src/config/load.ts";
export type { Config, ModelConfig } from "./src/config/schema.ts";
export {
  admit,
  createPolicy,
  estimateTtft,
  MOONCAKE_PREFILL_MODEL,
  POLICY_NAMES,
  prefillTimeS,
} from "./src/scheduling/mod.ts";
export type {
  Candidate,
  Decision,
  Policy,
  ScheduleContext,
  ScheduleRequest,
} from "./src/scheduling/types.ts";
export { computePrefixHits } from "./src/kv/prefix.ts";
export { MooncakeClient } from "./src/kv/mooncake_client.ts";
export { MergedIndex, withLatestPredictions } from "./src/kv/merged_index.ts";
export { PredictedIndex } from "./src/kv/predicted_index.ts";

const COMMANDS =
  `Usage: tidegate <command> [options]   (from source: deno run -A mod.ts <command> ...)

Commands:
  start --config FILE      run the router from a config file
  demo [--port N]          run the router on an embedded simulated cluster
  keys --config FILE ...   print (and --probe) the store keys of a prompt
  sim --trace FILE ...     replay a Mooncake trace through the scheduling policies`;

type Runner = (rest: string[]) => Promise<number>;

const RUNNERS: Record<string, Runner> = {
  start: async (rest) => (await import("./cli/start.ts")).runStart(rest),
  demo: async (rest) => (await import("./cli/demo.ts")).runDemo(rest),
  keys: async (rest) => (await import("./cli/keys.ts")).runKeys(rest),
  sim: async (rest) => (await import("./src/sim/cli.ts")).runSimCli(rest),
};

/**
 * The command a command line names (its first argument) and the arguments left for it, or
 * undefined when the first argument is no command. `main` dispatches through it; the deploy tests
 * run the pod's command line through it too.
 */
export function resolveCommand(
  args: string[],
): { command: string; rest: string[]; run: Runner } | undefined {
  const [command, ...rest] = args;
  const run = command !== undefined && Object.hasOwn(RUNNERS, command)
    ? RUNNERS[command]
    : undefined;
  return run ? { command: command!, rest, run } : undefined;
}

/** The command-line entry point; returns the process exit code. */
export async function main(args: string[]): Promise<number> {
  const resolved = resolveCommand(args);
  if (resolved) return await resolved.run(resolved.rest);
  const command = args[0];
  switch (command) {
    case undefined:
    case "help":
    case "--help":
    case "-h":
      console.log(COMMANDS);
      return command === undefined ? 2 : 0;
    default:
      console.error(`Unknown command "${command}".\n\n${COMMANDS}`);
      return 2;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));

/**
 * tidegate: a cache-aware edge router for LLM serving.
 *
 * Library use: `createRouter(config)`, `createKeyScheme(...)`, `loadTokenizer(dir)`, the pure
 * scheduling policies. Command line: `deno run -A mod.ts <start|demo|keys|sim> ...`.
 */
export { loadTokenizer } from "./src/tokenize/load_tokenizer.ts";
export type { LoadedTokenizer } from "./src/tokenize/local_tokenizer.ts";
export { createKeyScheme, hashBlocks, keysFromHashes } from "./src/hashing/key_scheme.ts";
export type { ExtraKeys, HashAlgorithm, KeyScheme, KeySchemeOptions } from "./src/hashing/types.ts";
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

const COMMANDS = `Usage: deno run -A mod.ts <command> [options]

Commands:
  start --config FILE      run the router from a config file
  demo [--port N]          run the router on an embedded simulated cluster
  keys --config FILE ...   print (and --probe) the store keys of a prompt
  sim --trace FILE ...     replay a Mooncake trace through the scheduling policies`;

/** The command-line entry point; returns the process exit code. */
export async function main(args: string[]): Promise<number> {
  const [command, ...rest] = args;
  switch (command) {
    case "start":
      return (await import("./cli/start.ts")).runStart(rest);
    case "demo":
      return (await import("./cli/demo.ts")).runDemo(rest);
    case "keys":
      return (await import("./cli/keys.ts")).runKeys(rest);
    case "sim":
      return (await import("./src/sim/cli.ts")).runSimCli(rest);
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

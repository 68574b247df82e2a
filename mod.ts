/**
 * tidegate as a library: a cache-aware edge router for LLM serving (`createRouter`), and the
 * pieces it is made of, each usable alone: the engines' store keys (`createKeyScheme`), their
 * tokenizers and chat templates (`loadTokenizer`), the Mooncake store client (`MooncakeClient`) and
 * the pure scheduling policies. The command line is cli/main.ts.
 *
 * @example A router from a config file, serving until the process ends
 * ```ts
 * import { createRouter, loadConfigFile } from "@tidegate/tidegate";
 *
 * const router = await createRouter(await loadConfigFile("tidegate.json"));
 * await router.warm();
 * const { port } = await router.serve({ port: 8080 });
 * console.log(`listening on ${port}`);
 * ```
 *
 * @module
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
export { createRouter, type RawConfig, type Router, type RouterOptions } from "./routes/app.ts";
export { ConfigError, loadConfigFile, parseConfigText, resolveConfig } from "./src/config/load.ts";
export type { Config, ModelConfig } from "./src/config/schema.ts";
export {
  admit,
  buildDecision,
  createPolicy,
  estimateTtft,
  MOONCAKE_PREFILL_MODEL,
  POLICY_NAMES,
  policyFactory,
  policyNames,
  prefillTimeS,
  registerPolicy,
  scorers,
} from "./src/scheduling/mod.ts";
export type { PolicyFactory } from "./src/scheduling/mod.ts";
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

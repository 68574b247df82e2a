import { parseCommandArgs } from "./args.ts";
import { ConfigError, loadConfigFile } from "../src/config/load.ts";
import type { Config, ModelConfig } from "../src/config/schema.ts";
import { ModelRuntime } from "../src/runtime/model_runtime.ts";
import { jsonLog } from "../src/telemetry/json_log.ts";
import { computePrefixHits, normalizeHost } from "../src/kv/prefix.ts";
import type { ChatMessage } from "../src/tokenize/types.ts";
import { runDetect } from "./keys_detect.ts";

const USAGE = `Usage: deno task keys --config FILE --model NAME
         (--prompt TEXT | --messages FILE.json | --tokens 1,2,3) [--chat-kwargs JSON]
         [--probe | --detect] [--json]

Prints the prompt's token count and each chunk's store key as the router computes them; with
--probe, asks the configured Mooncake master which keys exist and where, and ends with the pool
prefix and each instance's local prefix. Compare the keys with the store's GET /get_all_keys to
check that seed (PYTHONHASHSEED), chunk size and key preset match the engines. With --detect,
asks the store which candidate schemes (presets x hashes x seeds x chunk sizes x model spellings)
hold this prompt's keys and prints them best first with a ready-to-paste kv block.

Only the model's own sections are used: env:NAME values elsewhere (admin.token, the shared
state's Redis, tenants) need not be set.

Exit codes: 0 done; 2 a wrong flag, input or config (a tokenizer that cannot be loaded
included); 3 the store could not be asked (no chunk is then reported missing); 4 --detect found
no scheme whose keys the store holds; 1 an unexpected failure.`;

export interface KeysReport {
  model: string;
  hash: string;
  seed: string;
  chunkSize: number;
  keyFormat: string;
  tokens: number;
  chunks: {
    index: number;
    tokens: [number, number];
    hash: string;
    keys: string[];
    present?: boolean;
    hosts?: string[];
    instances?: string[];
  }[];
  probe?: {
    outcome: string;
    elapsedMs: number;
    error?: string;
    poolPrefixTokens: number;
    localPrefixTokens: Record<string, number>;
  };
}

/** A wrong flag or input: printed as is, exit code 2. */
class UsageError extends Error {}

const FLAGS = {
  config: { type: "string", short: "c" },
  model: { type: "string", short: "m" },
  prompt: { type: "string" },
  messages: { type: "string" },
  tokens: { type: "string" },
  "chat-kwargs": { type: "string" },
  probe: { type: "boolean", default: false },
  detect: { type: "boolean", default: false },
  json: { type: "boolean", default: false },
} as const;

interface KeysFlags {
  config?: string;
  model?: string;
  prompt?: string;
  messages?: string;
  tokens?: string;
  "chat-kwargs"?: string;
  probe?: boolean;
  detect?: boolean;
  json?: boolean;
}

/** `keys`: a user's tool to see (and probe) the keys the router computes for one prompt. */
export async function runKeys(
  args: string[],
  out: (line: string) => void = console.log,
): Promise<number> {
  const parsed = parseCommandArgs(args, FLAGS, USAGE, out);
  if (parsed.exit !== undefined) return parsed.exit;
  const values = parsed.values as KeysFlags;
  const inputs = [values.prompt, values.messages, values.tokens].filter((v) => v !== undefined);
  if (!values.config || inputs.length !== 1) {
    console.error(`Give --config and exactly one of --prompt, --messages, --tokens.\n\n${USAGE}`);
    return 2;
  }
  try {
    // keys serves nothing: the admin token, Redis URL and tenant keys may stay unset.
    const config = await loadConfigFile(values.config, undefined, {
      leaveEnvIn: ["admin", "cluster", "tenants"],
    });
    const modelConfig = selectModel(config, values.model);
    const runtime = await modelRuntime(config, modelConfig, values.config);
    const tokens = await promptTokens(runtime, values);
    if (values.detect) {
      if (!runtime.store) throw new UsageError(`Model ${modelConfig.name} has no store configured`);
      return await runDetect(runtime, tokens, values.json === true, out);
    }
    const report = keysReport(runtime, tokens);
    const asked = values.probe ? await probeStore(runtime, report, tokens.length) : true;
    if (values.json) out(JSON.stringify(report, null, 2));
    else for (const line of formatKeysReport(report)) out(line);
    if (asked) return 0;
    // A dead store must not look like a key mismatch (every chunk "missing").
    console.error(`keys: the store could not be asked (${report.probe?.error}); no chunk is known`);
    return 3;
  } catch (error) {
    if (error instanceof ConfigError || error instanceof UsageError) {
      console.error(error.message);
      return 2;
    }
    console.error(`keys failed: ${(error as Error).message}`);
    return 1;
  }
}

/**
 * The model's runtime (tokenizer, key scheme, store client); one that cannot be built is a
 * config problem (exit 2), named as `start --check` names it.
 */
async function modelRuntime(
  config: Config,
  model: ModelConfig,
  path: string,
): Promise<ModelRuntime> {
  try {
    return await ModelRuntime.create(model, {
      fetch,
      now: () => performance.now(),
      random: Math.random,
      log: jsonLog,
    });
  } catch (error) {
    const index = config.models.indexOf(model);
    throw new ConfigError([`models[${index}] (${model.name}): ${(error as Error).message}`], path);
  }
}

/** The model named by --model (or an alias), or the only one when none is named. */
function selectModel(config: Config, name: string | undefined): ModelConfig {
  const model = config.models.find((m) => m.name === name || m.aliases.includes(name ?? "")) ??
    (name === undefined && config.models.length === 1 ? config.models[0] : undefined);
  if (model) return model;
  throw new UsageError(
    `Unknown model "${name}"; the config has: ${config.models.map((m) => m.name).join(", ")}`,
  );
}

/** The prompt's tokens from --tokens, --prompt (tokenized) or --messages (chat template). */
async function promptTokens(runtime: ModelRuntime, values: KeysFlags): Promise<number[]> {
  if (values.tokens !== undefined) {
    const tokens = values.tokens.split(",").map((t) => t.trim()).filter(Boolean).map(Number);
    if (tokens.some((t) => !Number.isInteger(t) || t < 0)) {
      throw new UsageError("--tokens must be comma-separated non-negative integers");
    }
    return tokens;
  }
  if (values.prompt !== undefined) {
    return await runtime.tokenizer.encode(values.prompt, { addSpecialTokens: true });
  }
  const parsed = await readMessagesFile(values.messages!);
  const messages = (Array.isArray(parsed) ? parsed : parsed.messages) as ChatMessage[];
  if (!Array.isArray(messages)) {
    throw new UsageError(
      `${values.messages} must hold a JSON array of messages or {"messages": [...]}`,
    );
  }
  return await runtime.tokenizer.encodeChat(messages, {
    tools: Array.isArray(parsed) ? undefined : parsed.tools,
    chatTemplateKwargs: values["chat-kwargs"]
      ? JSON.parse(values["chat-kwargs"])
      : parsed.chat_template_kwargs,
  });
}

/** The --messages file's JSON; unreadable or not JSON is the user's input to fix (exit 2). */
async function readMessagesFile(path: string) {
  try {
    return JSON.parse(await Deno.readTextFile(path));
  } catch (error) {
    throw new UsageError(`--messages ${path}: ${(error as Error).message}`);
  }
}

/** Every full chunk's hash and store keys, as the router computes them. */
function keysReport(runtime: ModelRuntime, tokens: number[]): KeysReport {
  const scheme = runtime.keyScheme;
  const { chunkSize } = scheme.options;
  const hashes = scheme.blockHashes(tokens);
  const chunkKeys = scheme.chunkKeys(tokens); // as the router asks the store
  return {
    model: runtime.config.name,
    hash: scheme.options.hash,
    seed: scheme.options.seed ?? "(none: this chain is unseeded)",
    chunkSize,
    keyFormat: String(scheme.options.keyFormat),
    tokens: tokens.length,
    chunks: hashes.map((hash, index) => ({
      index,
      tokens: [index * chunkSize, Math.min(tokens.length, (index + 1) * chunkSize)],
      hash,
      keys: chunkKeys[index],
    })),
  };
}

/**
 * Asks the store which keys exist and where; fills each chunk and the prefixes in. False when the
 * store did not answer every key (down, refused, late): then no chunk is marked missing.
 */
async function probeStore(
  runtime: ModelRuntime,
  report: KeysReport,
  tokens: number,
): Promise<boolean> {
  const modelConfig = runtime.config;
  if (!runtime.store) {
    throw new UsageError(`Model ${modelConfig.name} has no store configured (kv.store is "none")`);
  }
  const instances = modelConfig.instances.map((i) => ({ id: i.id, kvHost: i.kvHost }));
  const chunkKeys = report.chunks.map((c) => c.keys);
  const lookup = await runtime.store.lookup(chunkKeys.flat(), {
    deadlineMs: Math.max(2000, modelConfig.kv.timeoutMs),
  });
  const answered = lookup.outcome === "ok" || lookup.outcome === "skipped";
  for (const chunk of answered ? report.chunks : []) {
    const locations = chunk.keys.map((k) => lookup.locations.get(k));
    chunk.present = locations.every((l) => l?.present === true);
    const hosts = [...new Set(locations.flatMap((l) => l?.memoryHosts ?? []))];
    chunk.hosts = hosts;
    chunk.instances = instances.filter((i) => i.kvHost && hosts.includes(normalizeHost(i.kvHost)))
      .map((i) => i.id);
  }
  const hits = computePrefixHits(chunkKeys, lookup.locations, instances);
  const capped = (chunks: number) => Math.min(tokens, chunks * report.chunkSize);
  report.probe = {
    outcome: lookup.outcome,
    elapsedMs: Math.round(lookup.elapsedMs * 10) / 10,
    error: lookup.error,
    poolPrefixTokens: capped(hits.poolChunks),
    localPrefixTokens: Object.fromEntries(
      [...hits.localChunks].map(([id, chunks]) => [id, capped(chunks)]),
    ),
  };
  return answered;
}

export function formatKeysReport(report: KeysReport): string[] {
  const lines = [
    `model ${report.model}: ${report.tokens} tokens, ${report.chunks.length} full chunk(s) of ${report.chunkSize}`,
    `hash ${report.hash} seed "${report.seed}" key format ${report.keyFormat}`,
  ];
  if (report.chunks.length === 0) {
    lines.push("(no full chunk: nothing is looked up for this prompt)");
  }
  for (const chunk of report.chunks) {
    let line = `#${chunk.index} [${chunk.tokens[0]}, ${chunk.tokens[1]}) ${chunk.keys.join(" ")}`;
    if (chunk.present !== undefined) {
      line += chunk.present
        ? `  present on ${chunk.hosts!.join(", ") || "disk"}${
          chunk.instances!.length ? ` (${chunk.instances!.join(", ")})` : ""
        }`
        : "  missing";
    }
    lines.push(line);
  }
  if (report.probe) {
    lines.push(
      `store lookup: ${report.probe.outcome} in ${report.probe.elapsedMs} ms${
        report.probe.error ? ` (${report.probe.error})` : ""
      }`,
    );
    if (report.probe.outcome !== "ok" && report.probe.outcome !== "skipped") {
      lines.push("the store could not be asked: whether each chunk is present is unknown");
      return lines;
    }
    lines.push(`pool prefix: ${report.probe.poolPrefixTokens} tokens`);
    for (const [id, tokens] of Object.entries(report.probe.localPrefixTokens)) {
      lines.push(`local prefix ${id}: ${tokens} tokens`);
    }
  }
  return lines;
}

import { parseCommandArgs } from "./args.ts";
import { createKeyFormatter } from "../src/hashing/key_scheme.ts";
import { ConfigError, loadConfigFile } from "../src/config/load.ts";
import { ModelRuntime } from "../src/gateway/model_runtime.ts";
import { jsonLog } from "../src/telemetry/json_log.ts";
import { computePrefixHits, normalizeHost } from "../src/kv/prefix.ts";
import type { ChatMessage } from "../src/tokenize/types.ts";

const USAGE = `Usage: deno task keys --config FILE --model NAME
         (--prompt TEXT | --messages FILE.json | --tokens 1,2,3) [--chat-kwargs JSON] [--probe] [--json]

Prints the prompt's token count and each chunk's store key as the router computes them; with
--probe, asks the configured Mooncake master which keys exist and where, and ends with the pool
prefix and each instance's local prefix. Compare the keys with the store's GET /get_all_keys to
check that seed (PYTHONHASHSEED), chunk size and key preset match the engines.`;

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

/** `keys`: a user's tool to see (and probe) the keys the router computes for one prompt. */
export async function runKeys(
  args: string[],
  out: (line: string) => void = console.log,
): Promise<number> {
  const parsed = parseCommandArgs(
    args,
    {
      config: { type: "string", short: "c" },
      model: { type: "string", short: "m" },
      prompt: { type: "string" },
      messages: { type: "string" },
      tokens: { type: "string" },
      "chat-kwargs": { type: "string" },
      probe: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
    },
    USAGE,
    out,
  );
  if (parsed.exit !== undefined) return parsed.exit;
  const { values } = parsed;
  const inputs = [values.prompt, values.messages, values.tokens].filter((v) => v !== undefined);
  if (!values.config || inputs.length !== 1) {
    console.error(`Give --config and exactly one of --prompt, --messages, --tokens.\n\n${USAGE}`);
    return 2;
  }
  try {
    const config = await loadConfigFile(values.config);
    const modelConfig = config.models.find((m) =>
      m.name === values.model || m.aliases.includes(values.model ?? "")
    ) ?? (values.model === undefined && config.models.length === 1 ? config.models[0] : undefined);
    if (!modelConfig) {
      console.error(
        `Unknown model "${values.model}"; the config has: ${
          config.models.map((m) =>
            m.name
          ).join(", ")
        }`,
      );
      return 2;
    }
    const runtime = await ModelRuntime.create(modelConfig, {
      fetch,
      now: () => performance.now(),
      random: Math.random,
      log: jsonLog,
    });

    let tokens: number[];
    if (values.tokens !== undefined) {
      tokens = values.tokens.split(",").map((t) => t.trim()).filter(Boolean).map(Number);
      if (tokens.some((t) => !Number.isInteger(t) || t < 0)) {
        console.error("--tokens must be comma-separated non-negative integers");
        return 2;
      }
    } else if (values.prompt !== undefined) {
      tokens = await runtime.tokenizer.encode(values.prompt, { addSpecialTokens: true });
    } else {
      const parsed = JSON.parse(await Deno.readTextFile(values.messages!));
      const messages = (Array.isArray(parsed) ? parsed : parsed.messages) as ChatMessage[];
      if (!Array.isArray(messages)) {
        console.error(
          `${values.messages} must hold a JSON array of messages or {"messages": [...]}`,
        );
        return 2;
      }
      tokens = await runtime.tokenizer.encodeChat(messages, {
        tools: Array.isArray(parsed) ? undefined : parsed.tools,
        chatTemplateKwargs: values["chat-kwargs"]
          ? JSON.parse(values["chat-kwargs"])
          : parsed.chat_template_kwargs,
      });
    }

    const scheme = runtime.keyScheme;
    const { chunkSize } = scheme.options;
    const hashes = scheme.blockHashes(tokens);
    const chunkKeys = createKeyFormatter(scheme.options).chunkKeys(hashes);
    const report: KeysReport = {
      model: modelConfig.name,
      hash: scheme.options.hash,
      seed: scheme.options.seed ?? "0",
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

    if (values.probe) {
      if (!runtime.store) {
        console.error(`Model ${modelConfig.name} has no store configured (kv.store is "none")`);
        return 2;
      }
      const instances = modelConfig.instances.map((i) => ({ id: i.id, kvHost: i.kvHost }));
      const lookup = await runtime.store.lookup(chunkKeys.flat(), {
        deadlineMs: Math.max(2000, modelConfig.kv.timeoutMs),
      });
      for (const chunk of report.chunks) {
        const locations = chunk.keys.map((k) => lookup.locations.get(k));
        chunk.present = locations.every((l) => l?.present === true);
        const hosts = [...new Set(locations.flatMap((l) => l?.memoryHosts ?? []))];
        chunk.hosts = hosts;
        chunk.instances = instances.filter((i) =>
          i.kvHost && hosts.includes(normalizeHost(i.kvHost))
        ).map((i) => i.id);
      }
      const hits = computePrefixHits(chunkKeys, lookup.locations, instances);
      report.probe = {
        outcome: lookup.outcome,
        elapsedMs: Math.round(lookup.elapsedMs * 10) / 10,
        error: lookup.error,
        poolPrefixTokens: Math.min(tokens.length, hits.poolChunks * chunkSize),
        localPrefixTokens: Object.fromEntries(
          [...hits.localChunks].map((
            [id, chunks],
          ) => [id, Math.min(tokens.length, chunks * chunkSize)]),
        ),
      };
    }

    if (values.json) out(JSON.stringify(report, null, 2));
    else for (const line of formatKeysReport(report)) out(line);
    return 0;
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      return 2;
    }
    console.error(`keys failed: ${(error as Error).message}`);
    return 1;
  }
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
    lines.push(`pool prefix: ${report.probe.poolPrefixTokens} tokens`);
    for (const [id, tokens] of Object.entries(report.probe.localPrefixTokens)) {
      lines.push(`local prefix ${id}: ${tokens} tokens`);
    }
  }
  return lines;
}

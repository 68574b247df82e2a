/**
 * docs/configuration.md, written from the config schema itself (`deno task docs:config`;
 * tests/docs/configuration_doc_test.ts fails when the file is stale). Every field of schema.ts and
 * model_schema.ts with its type, default and description: types and defaults come from the zod
 * schema (`z.toJSONSchema`), descriptions from the doc comments written on the fields in those
 * files (read from their source text, passed in), and the policies and their parameters from the
 * scheduling registry. Pure: the caller reads the files and formats the result.
 */
import { z } from "zod";
import { ConfigSchema } from "./schema.ts";
import { POLICY_NAMES, policyFactoryOf, TTFT_PARAMS } from "../scheduling/registry.ts";
import { DECODE_POLICY_NAMES } from "../scheduling/decode_policy.ts";

/** A source file of the schema, for the doc comments on its fields. */
export interface SchemaSource {
  path: string;
  text: string;
}

/** The files whose doc comments describe the fields (relative to the repository root). */
export const SCHEMA_SOURCES = ["src/config/schema.ts", "src/config/model_schema.ts"] as const;

/** The schema's root constant in schema.ts. */
const ROOT = "ConfigSchema";

/**
 * Descriptions of the fields whose declaration carries no doc comment, checked against the code
 * they describe (the generator refuses one for a field that does not exist or has its own).
 */
const MORE_DESCRIPTIONS: Record<string, string> = {
  "listen": "Where the router listens, and with which server.",
  "limits": "Bounds on every connection and request ([reliability.md](reliability.md)).",
  "admin": "The admin API's token and the hosts instances may use ([api.md](api.md#admin-api)).",
  "cluster": "Several router replicas in front of the same engines.",
  "tenants.list": "The configured tenants, each with its identities and limits.",
  "models": "The models the router serves, each with its own engines, store and policy.",
  "models[].loras": "LoRA adapters clients may name as the model; the adapter enters the hash.",
  "models[].loras[].name": "The name clients send in `model`.",
  "models[].tokenizer": "How prompts are tokenized: as the engine does, so the keys match.",
  "models[].kv":
    "The Mooncake store and the engines' key scheme ([keys.md](keys.md)); **required**, even " +
    'if only `{"store": "none"}`.',
  "models[].slo": "SLOs and admission ([routing.md](routing.md#admission)).",
  "models[].health": "One circuit breaker per instance, fed by probes and by real traffic.",
  "models[].instances": "Engines by address; the admin API and discovery add more.",
  "models[].experiment.arms[].name": "The arm's name: in `x-tidegate-arm` and the `arm` labels.",
  "listen.host": "Address the router listens on (`0.0.0.0` for every interface, e.g. in a pod).",
  "listen.port": "TCP port; `start --port` overrides it. Changing it needs a restart.",
  "limits.maxBodyBytes":
    "A request body larger than this gets 413 `request_too_large` (read no further).",
  "models[].name": "The model name clients send in `model`.",
  "models[].instances[].id":
    "At most 128 letters, digits, `_ . : -`: a metric label and an admin URL segment.",
  "models[].instances[].url": "The engine's base URL (http or https, no credentials).",
  "models[].instances[].role":
    "`prefill` and `decode` need the model's `disaggregation` section; `neutral` serves whole " +
    "requests.",
  "models[].instances[].engine":
    "Picks the health probe and the load report: `vllm` `/health` and `/metrics`, `sglang` " +
    "`/health` and `/get_load`, `openai` (any OpenAI server) `/v1/models` and no report.",
  "models[].discovery[].hostname":
    "Resolved every `intervalMs` with `Deno.resolveDns`; a failed resolution keeps the previous " +
    "set.",
  "models[].discovery[].port": "Required for `A` and `AAAA` records.",
  "models[].discovery[].intervalMs": "Period of the DNS resolution.",
  "models[].kv.store":
    "`none`: no store lookups; hits come from the router's own predicted index only.",
  "models[].kv.hash": "The engines' prefix-caching hash ([keys.md](keys.md)).",
  "models[].kv.chunkSize": "Tokens per store key: the connector's block or chunk size.",
  "models[].kv.saveUnfullChunk": "Also hash a last chunk shorter than `chunkSize`.",
  "models[].kv.keyParams":
    "The key layout's parameters (model spelling, ranks, dtype, ...): [keys.md](keys.md).",
  "models[].kv.requireAllRanks":
    "Count a chunk only when every TP/PP rank's key exists (asked in the same batch); " +
    "default: rank 0 only, as Llumnix does.",
  "models[].kv.minPromptTokens": "Shorter prompts are not looked up in the store.",
  "models[].kv.timeoutMs":
    "Deadline of one store lookup; past it the request is dispatched by load, and three " +
    "misses in a row start the down-window.",
  "models[].kv.batchSize": "Keys per `/batch_query_keys` call (the calls run in parallel).",
  "models[].kv.predictedIndex":
    "The router's own recent dispatches: keys an instance is about to write, found before the " +
    "store has them.",
  "models[].kv.predictedIndex.ttlMs": "How long a dispatch's keys are remembered.",
  "models[].kv.predictedIndex.maxKeys": "Bound on the keys remembered.",
  "models[].tokenizer.fastPath":
    "tiktoken and the piece cache for tokenizers that allow it (tested equal to the exact path).",
  "models[].policy":
    "A policy name, or `{name, params}`: see [Policies](#policies) for the names and parameters.",
  "models[].slo.ttftS": "TTFT SLO in seconds, judged by admission.",
  "models[].slo.tbtS": "Time-between-tokens SLO in seconds (decode side).",
  "models[].slo.admission":
    "Answer 429 with `Retry-After` when the best predicted TTFT (or TBT) breaks the SLO.",
  "models[].health.intervalMs": "Period of the active health probe.",
  "models[].health.timeoutMs": "A probe slower than this failed.",
  "models[].health.failuresToOpen":
    "Consecutive failures (probes or requests) that open the breaker.",
  "models[].health.successesToClose": "Successes that close a half-open breaker.",
  "models[].experiment.arms": "2 to 16 arms, the first being the control.",
  "models[].experiment.arms[].weight": "Share of the keys (weighted rendezvous hashing).",
  "models[].disaggregation.protocol": "The P/D protocol the engines speak (docs/compat.md §7).",
  "models[].disaggregation.decodePolicy":
    "`least_running`: fewest running requests; `kv_headroom`: most free KV cache.",
};

/** The schema's comments name docs/ pages as paths: in docs/configuration.md they are links. */
const MOVED_SECTIONS: [RegExp, string][] = [
  [/docs\/api\.md, "Tenants"/g, "[api.md, Tenants](api.md#tenants)"],
  [/docs\/reliability\.md/g, "[reliability.md](reliability.md#the-listener)"],
];

type Json = Record<string, unknown>;

/** One field declaration in the source: its doc comment and the schema constants it names. */
interface Declared {
  doc?: string;
  refs: string[];
}

/** Doc comments by schema constant and the field path inside it (object keys only). */
class SourceDocs {
  readonly #fields = new Map<string, Declared>();
  readonly #constants = new Map<string, string | undefined>();

  constructor(sources: readonly SchemaSource[]) {
    for (const source of sources) this.#read(source.text);
  }

  /** Reads `const NAME = ...` blocks (top level) and the `key:` lines in them, by indentation. */
  #read(text: string): void {
    const lines = text.split("\n");
    let constant: string | undefined;
    let stack: { indent: number; key: string }[] = [];
    let pending: string[] | undefined;
    let comment: string | undefined;
    for (const line of lines) {
      const trimmed = line.trim();
      if (pending) {
        pending.push(trimmed);
        if (trimmed.endsWith("*/")) {
          comment = cleanComment(pending);
          pending = undefined;
        }
        continue;
      }
      if (trimmed.startsWith("/**")) {
        if (trimmed.endsWith("*/")) comment = cleanComment([trimmed]);
        else pending = [trimmed];
        continue;
      }
      const top = /^(export )?const (\w+)\s*=/.exec(line);
      if (top) {
        constant = top[2];
        stack = [];
        // A private constant's comment may be the file's own (schema.ts opens that way).
        this.#constants.set(constant, top[1] ? comment : undefined);
        comment = undefined;
        continue;
      }
      const field = /^(\s+)(\w+):\s*(.*)$/.exec(line);
      if (constant !== undefined && field) {
        const indent = field[1].length;
        while (stack.length && stack.at(-1)!.indent >= indent) stack.pop();
        stack.push({ indent, key: field[2] });
        const refs = [...field[3].matchAll(/\b([A-Z]\w*Schema)\b/g)].map((m) => m[1]);
        const key = `${constant}:${stack.map((s) => s.key).join(".")}`;
        if (!this.#fields.has(key)) this.#fields.set(key, { doc: comment, refs });
      }
      if (trimmed !== "") comment = undefined;
    }
  }

  /** The description of a field at `path` (object keys from the root), if its source has one. */
  describe(path: readonly string[]): string | undefined {
    return this.#find(ROOT, [], path);
  }

  /** The doc comment on the field's own declaration (not its schema constant's), if any. */
  describeOwn(path: readonly string[]): string | undefined {
    return this.#find(ROOT, [], path, false);
  }

  #find(
    constant: string,
    within: readonly string[],
    rest: readonly string[],
    constantDocs = true,
  ): string | undefined {
    const here = this.#fields.get(`${constant}:${within.join(".")}`);
    if (rest.length === 0) {
      if (here?.doc) return here.doc;
      if (!constantDocs) return undefined;
      const refs = within.length === 0 ? [constant] : here?.refs ?? [];
      return refs.map((ref) => this.#constants.get(ref)).find((doc) => doc !== undefined);
    }
    const inner = [...within, rest[0]];
    if (this.#fields.has(`${constant}:${inner.join(".")}`)) {
      return this.#find(constant, inner, rest.slice(1), constantDocs);
    }
    for (const ref of within.length === 0 ? [] : here?.refs ?? []) {
      const found = this.#find(ref, [], rest, constantDocs);
      if (found !== undefined) return found;
    }
    return undefined;
  }
}

function cleanComment(lines: string[]): string {
  return lines
    .map((l) => l.replace(/^\/\*\*\s?/, "").replace(/\s*\*\/$/, "").replace(/^\*\s?/, ""))
    .filter((l) => l !== "")
    .join(" ")
    .trim();
}

/** A field of an object section, as the tables show it. */
interface Row {
  key: string;
  type: string;
  default: string;
  description: string;
}

/** An object of the schema with its own table. */
interface Section {
  path: string;
  keys: string[];
  doc?: string;
  rows: Row[];
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** The markdown of docs/configuration.md, before formatting (`deno fmt` aligns the tables). */
export function configurationMarkdown(sources: readonly SchemaSource[]): string {
  const docs = new SourceDocs(sources);
  checkMoreDescriptions(docs);
  const root = z.toJSONSchema(ConfigSchema, { io: "input", unrepresentable: "any" }) as Json;
  const sections: Section[] = [];
  collectSections(root, [], "", docs, sections);
  const out = [INTRO.trim(), "", "## Contents", ""];
  out.push(...sections.map((s) => `- [${title(s)}](#${anchor(title(s))})`));
  out.push("- [Policies](#policies)", "");
  for (const section of sections) {
    out.push(`## ${title(section)}`, "");
    if (section.doc) out.push(linked(section.doc), "");
    out.push("| field | type | default | description |", "|---|---|---|---|");
    for (const row of section.rows) {
      out.push(
        `| \`${row.key}\` | ${cell(row.type)} | ${cell(row.default)} | ${
          cell(linked(row.description))
        } |`,
      );
    }
    out.push("");
  }
  out.push(...policiesSection());
  return out.join("\n") + "\n";
}

function title(section: Section): string {
  return section.path === "" ? "Top level" : `\`${section.path}\``;
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens. */
export function anchor(heading: string): string {
  return heading.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").trim().replace(/\s/g, "-");
}

function cell(text: string): string {
  return text.replace(/\|/g, "\\|").replace(/\n/g, " ");
}

function linked(text: string): string {
  return MOVED_SECTIONS.reduce((t, [from, to]) => t.replace(from, to), text);
}

/** The object (with properties) a field holds, directly or as an array's items. */
function objectOf(node: Json): { node: Json; suffix: string } | undefined {
  if (node.type === "object" && node.properties) return { node, suffix: "" };
  if (node.type === "array") {
    const items = node.items as Json;
    if (items?.type === "object" && items.properties) return { node: items, suffix: "[]" };
  }
  return undefined;
}

function collectSections(
  node: Json,
  keys: string[],
  path: string,
  docs: SourceDocs,
  out: Section[],
): void {
  const properties = node.properties as Record<string, Json>;
  const required = new Set((node.required as string[] | undefined) ?? []);
  const section: Section = {
    path,
    keys,
    doc: keys.length
      ? docs.describeOwn(keys) ?? MORE_DESCRIPTIONS[path.replace(/\[\]$/, "")] ??
        docs.describe(keys)
      : undefined,
    rows: [],
  };
  out.push(section);
  const nested: [Json, string[], string][] = [];
  for (const [key, child] of Object.entries(properties)) {
    const childKeys = [...keys, key];
    const childPath = path ? `${path}.${key}` : key;
    const object = objectOf(child);
    const description = docs.describeOwn(childKeys) ?? MORE_DESCRIPTIONS[childPath] ??
      docs.describe(childKeys) ?? "";
    section.rows.push({
      key,
      type: object
        ? `${object.suffix ? "array of objects" : "object"}: [\`${childPath}${object.suffix}\`](#${
          anchor(`\`${childPath}${object.suffix}\``)
        })${arrayBounds(child)}`
        : typeLabel(child),
      default: defaultLabel(child, required.has(key)),
      description,
    });
    if (object) nested.push([object.node, childKeys, `${childPath}${object.suffix}`]);
  }
  for (const [child, childKeys, childPath] of nested) {
    collectSections(child, childKeys, childPath, docs, out);
  }
}

/** The extra descriptions name real fields that have no comment of their own. */
function checkMoreDescriptions(docs: SourceDocs): void {
  const root = z.toJSONSchema(ConfigSchema, { io: "input", unrepresentable: "any" }) as Json;
  const fields = new Map<string, string[]>();
  const walk = (node: Json, keys: string[], path: string) => {
    for (const [key, child] of Object.entries((node.properties ?? {}) as Record<string, Json>)) {
      const childPath = path ? `${path}.${key}` : key;
      fields.set(childPath, [...keys, key]);
      const object = objectOf(child);
      if (object) walk(object.node, [...keys, key], childPath + object.suffix);
    }
  };
  walk(root, [], "");
  const wrong = Object.keys(MORE_DESCRIPTIONS).flatMap((path) => {
    const keys = fields.get(path);
    if (!keys) return [`${path}: no such field`];
    return docs.describeOwn(keys) ? [`${path}: the schema describes it already`] : [];
  });
  if (wrong.length) throw new Error(`config_doc.ts MORE_DESCRIPTIONS:\n  ${wrong.join("\n  ")}`);
}

function arrayBounds(node: Json): string {
  const min = node.minItems as number | undefined;
  const max = node.maxItems as number | undefined;
  if (min === undefined && max === undefined) return "";
  if (max === undefined) return `, at least ${min}`;
  return min === undefined ? `, at most ${max}` : `, ${min} to ${max}`;
}

function typeLabel(node: Json): string {
  if (Array.isArray(node.anyOf)) return (node.anyOf as Json[]).map(typeLabel).join(", or ");
  if (Array.isArray(node.enum)) {
    return `one of ${(node.enum as unknown[]).map((v) => `\`${JSON.stringify(v)}\``).join(", ")}`;
  }
  switch (node.type) {
    case "string":
      return node.format === "uri" ? "URL" : "string";
    case "boolean":
      return "boolean";
    case "integer":
    case "number":
      return `${node.type}${numberBounds(node)}`;
    case "array": {
      const items = node.items as Json;
      const of = items?.type === "object" && items.properties
        ? `\`{${Object.keys(items.properties as Json).join(", ")}}\``
        : typeLabel(items ?? {});
      return `array of ${of}${arrayBounds(node)}`;
    }
    case "object":
      if (node.properties) {
        return `object \`{${Object.keys(node.properties as Json).join(", ")}}\``;
      }
      if (node.additionalProperties && typeof node.additionalProperties === "object") {
        return `object of ${typeLabel(node.additionalProperties as Json)}`;
      }
      return "object";
  }
  return "any";
}

function numberBounds(node: Json): string {
  const min = node.minimum as number | undefined;
  const max = node.maximum as number | undefined;
  const above = node.exclusiveMinimum as number | undefined;
  if (above !== undefined) return ` > ${above}`;
  const hasMax = max !== undefined && max < MAX_SAFE;
  if (min !== undefined && hasMax) return ` ${min} to ${max}`;
  if (min !== undefined && min > -MAX_SAFE) return ` ≥ ${min}`;
  if (hasMax) return ` ≤ ${max}`;
  return "";
}

function defaultLabel(node: Json, required: boolean): string {
  if (!("default" in node)) return required ? "**required**" : "unset";
  const value = node.default;
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    return Object.keys(value).length === 0
      ? "its fields' defaults"
      : `\`${JSON.stringify(value)}\``;
  }
  return `\`${JSON.stringify(value)}\``;
}

/** The policies by name with their parameters, from the registry. */
function policiesSection(): string[] {
  const out = [
    "## Policies",
    "",
    "`models[].policy` and each experiment arm's `policy` name one of these, alone " +
    '(`"policy": "mooncake_ttft"`) or with parameters (`"policy": {"name": "cache_aware", ' +
    '"params": {"loadFilterTokens": 8192}}`). A parameter a policy does not take is refused, ' +
    "with the list of those it does. A library user adds policies with `registerPolicy()`.",
    "",
    "| policy | what it picks | its own parameters |",
    "|---|---|---|",
  ];
  for (const name of POLICY_NAMES) {
    const factory = policyFactoryOf(name)!;
    const params = z.toJSONSchema(factory.params, { io: "input", unrepresentable: "any" }) as Json;
    const own = Object.entries((params.properties ?? {}) as Record<string, Json>)
      .map(([key, node]) => `\`${key}\` (${typeLabel(node)})`).join(", ") || "none";
    out.push(`| \`${name}\` | ${cell(factory.summary)} | ${cell(own)} |`);
  }
  const ttft = z.toJSONSchema(TTFT_PARAMS, { io: "input", unrepresentable: "any" }) as Json;
  const ttftKeys = Object.entries((ttft.properties ?? {}) as Record<string, Json>)
    .map(([key, node]) => `\`${key}\` (${typeLabel(node)})`);
  out.push(
    "",
    "Every policy also takes the TTFT model's parameters, which the planning step predicts with " +
      `whatever the policy: ${ttftKeys.join(", ")}.`,
    "",
    "A disaggregated model's decode instance is chosen by `disaggregation.decodePolicy`: " +
      `${DECODE_POLICY_NAMES.map((n) => `\`${n}\``).join(", ")}.`,
    "",
  );
  return out;
}

const INTRO = `
# Configuration reference

<!-- Generated by \`deno task docs:config\` from src/config/schema.ts, src/config/model_schema.ts
and the scheduling registry (the generator is src/config/config_doc.ts). Do not edit by hand:
tests/docs/configuration_doc_test.ts fails when this file is stale. -->

The router runs from one file, JSON or YAML (a \`.yaml\` or \`.yml\` name is read as YAML, any other
as JSON): \`deno task start --config FILE\`. The file is validated as a whole, at start and at every
reload, and every problem is reported at once with its field path; a misspelt field, option or
policy name gets the closest valid one. \`deno task start --config FILE --check\` does all of it
without listening or contacting anything (the schema and every check below, \`env:\` values,
policies and experiment arms, tokenizer files and each model's key scheme): exit 0 with a summary, or
2 with every problem.

- **Defaults.** A section left out takes its fields' defaults; only \`models\` is required, and in
  each model \`name\`, \`kv\` and instances (or discovery entries).
- **\`env:NAME\`** reads a secret from the environment in \`admin.token\`,
  \`cluster.sharedState.redis\` and each \`tenants.list[].match[]\` entry; an unset or empty variable
  is a problem. \`keys\` reads none of them (it uses only the model's sections).
- **Paths.** A relative \`tokenizer.path\` resolves against the config file's directory;
  \`builtin:qwen3\` is the Qwen3 tokenizer shipped with the router.
- **Reload.** \`start\` watches its file and reloads on SIGHUP; an invalid file is rejected with every
  reason and the running config kept ([operations.md](operations.md#upgrades-drains-and-reloads)).

Besides the types below, each model is checked as soon as it parses, whatever is wrong elsewhere in
the file (src/config/model_checks.ts), and the file as a whole (src/config/schema.ts):

- a model needs at least one instance or discovery entry; instance ids and discovery names are
  unique within it; \`A\` and \`AAAA\` discovery entries need a \`port\`;
- \`kv.url\` is required when \`kv.store\` is \`"mooncake"\` (no master listed twice);
  \`tokenizer.path\` when \`tokenizer.mode\` is \`"local"\`; \`slo.admission\` needs \`slo.ttftS\` and/or
  \`slo.tbtS\`;
- \`prefill\` and \`decode\` roles need a \`disaggregation\` section, and a disaggregated model needs at
  least one prefill and one decode instance (configured or discovered);
- \`policy\` and every experiment arm's \`policy\` build: a known name ([Policies](#policies)) with
  parameters it takes;
- the key scheme builds: hash, seed, chunk sizes, key format and its parameters agree (an option
  only one key format reads is refused with the others; \`xxhash\` needs a seed: [keys.md](keys.md));
- model names, aliases and LoRA names are unique across models; \`experiment.overrideHeader\` needs
  \`admin.token\`; tenant names are unique, \`other\` is reserved, and an identity names one tenant;
  \`cluster.sharedState.silentAfterMs\` exceeds \`heartbeatMs\`;
- instance URLs are \`http://\` or \`https://\` without credentials (\`user:pass@\`), everywhere.

A small config for a real cluster (one engine, one Mooncake master; the demo writes a complete one
for its own cluster with \`deno task demo --write-config FILE\`):

\`\`\`json
{
  "listen": { "host": "127.0.0.1", "port": 8080 },
  "admin": { "token": "env:TIDEGATE_ADMIN_TOKEN" },
  "models": [
    {
      "name": "qwen3",
      "tokenizer": { "path": "/models/Qwen3-8B" },
      "kv": { "url": "http://127.0.0.1:9003", "seed": "0", "chunkSize": 256, "keyFormat": "llumnix" },
      "policy": "cache_aware",
      "instances": [{ "id": "gpu-a", "url": "http://127.0.0.1:8001", "kvHost": "10.0.0.1" }]
    }
  ]
}
\`\`\`

More in \`deploy/examples/\` (a DNS-discovered YAML setup and an SGLang HiCache setup) and the
Kubernetes overlays' \`router.yaml\`; tests validate every one of them.
`;

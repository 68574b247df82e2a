import type { KeyFormatPreset, KeySchemeOptions } from "./types.ts";

/** The options that shape store keys (everything but the chain). */
export type KeyFormatOptions = Pick<
  KeySchemeOptions,
  | "keyFormat"
  | "model"
  | "tpRank"
  | "ppRank"
  | "tpSize"
  | "ppSize"
  | "worldSize"
  | "workerId"
  | "dtype"
  | "tag"
  | "cachePrefix"
  | "group"
  | "mla"
  | "requireAllRanks"
>;

/** Turns chunk hashes (hex, or decimal for xxh64_cumulative) into store keys. */
export interface KeyFormatter {
  /** The primary key of each chunk. */
  keys(hashes: readonly string[]): string[];
  /** Every key each chunk needs; `result[i][0]` is `keys(hashes)[i]`. */
  chunkKeys(hashes: readonly string[]): string[][];
}

const KEY_FORMAT_PRESETS: readonly KeyFormatPreset[] = [
  "llumnix",
  "vllm-mooncake-store",
  "lmcache",
  "sglang-hicache",
];

/**
 * Placeholders of a custom template (any `keyFormat` that is not a preset):
 * - `{hex}`            the chunk hash (required)
 * - `{i}`              the chunk index, 0-based
 * - `{model}`          the model name as given, e.g. `Qwen/Qwen3-8B`
 * - `{model_basename}` its last path component, `Qwen3-8B`
 * - `{model_dashed}`   `/` replaced by `-`, `Qwen-Qwen3-8B`
 * - `{tp_rank}` `{pp_rank}` `{worker_id}`  ranks (enumerated with `requireAllRanks`)
 * - `{tp_size}` `{pp_size}` `{world_size}` sizes
 * - `{dtype}` `{tag}` `{cache_prefix}` `{group}`  the options of the same name
 * e.g. `"{model}@{world_size}@{worker_id}@{hex}@{dtype}"` is the `lmcache` preset.
 */
const TEMPLATE_PLACEHOLDERS: readonly string[] = [
  "hex",
  "i",
  "model",
  "model_basename",
  "model_dashed",
  "tp_rank",
  "pp_rank",
  "worker_id",
  "tp_size",
  "pp_size",
  "world_size",
  "dtype",
  "tag",
  "cache_prefix",
  "group",
];

const HEX = 0;
const INDEX = 1;
/** A compiled key: literal text, the chunk hash (HEX) or the chunk index (INDEX). */
type Piece = string | typeof HEX | typeof INDEX;
type Template = readonly Piece[];

interface Params {
  model?: string;
  dtype?: string;
  tag?: string;
  cachePrefix?: string;
  group?: number;
  tpRank: number;
  ppRank: number;
  tpSize: number;
  ppSize: number;
  worldSize: number;
  workerId: number;
  mla: boolean;
}

interface Layout {
  primary: Template;
  /** Every key a chunk needs, `primary` included (placed first by `compileKeyFormat`). */
  all: Template[];
}

/** Builds a formatter; throws one error listing every problem with the options. */
export function createKeyFormatter(options: KeyFormatOptions): KeyFormatter {
  const { formatter, problems } = compileKeyFormat(options);
  if (formatter === null) {
    throw new Error(`Invalid key format options:\n- ${problems.join("\n- ")}`);
  }
  return formatter;
}

/** Store keys for already computed chunk hashes (e.g. to check keys read from a store). */
export function keysFromHashes(hashes: readonly string[], options: KeyFormatOptions): string[] {
  return createKeyFormatter(options).keys(hashes);
}

/** The formatter, or the list of problems that prevent building it. */
export function compileKeyFormat(
  options: KeyFormatOptions,
): { formatter: KeyFormatter; problems: [] } | { formatter: null; problems: string[] } {
  const problems: string[] = [];
  const params = resolveParams(options, problems);
  const { keyFormat } = options;
  let layout: Layout | null = null;
  if (typeof keyFormat !== "string") {
    problems.push(`keyFormat must be a preset name or a template string, got ${typeof keyFormat}`);
  } else {
    layout = (KEY_FORMAT_PRESETS as readonly string[]).includes(keyFormat)
      ? presetLayout(keyFormat as KeyFormatPreset, params, problems)
      : templateLayout(keyFormat, params, problems);
  }
  if (layout !== null) {
    for (const t of layout.all) {
      for (const piece of t) {
        if (typeof piece === "string" && piece.includes(",")) {
          problems.push(
            `Keys would contain a comma (${JSON.stringify(piece)}): Mooncake's ` +
              `batch_query_keys joins keys with commas, so no key may contain one`,
          );
          break;
        }
      }
    }
  }
  if (layout === null || problems.length > 0) return { formatter: null, problems };

  const primary = render(layout.primary);
  const primaryId = JSON.stringify(layout.primary);
  const all = options.requireAllRanks
    ? [layout.primary, ...layout.all.filter((t) => JSON.stringify(t) !== primaryId)].map(render)
    : [primary];
  return {
    formatter: {
      keys: (hashes) => hashes.map((h, i) => primary(h, i)),
      chunkKeys: (hashes) => hashes.map((h, i) => all.map((key) => key(h, i))),
    },
    problems: [],
  };
}

/** A fast renderer for the common `prefix + hash + suffix` shape, generic otherwise. */
function render(t: Template): (hash: string, index: number) => string {
  if (t.length === 3 && typeof t[0] === "string" && t[1] === HEX && typeof t[2] === "string") {
    const [pre, , post] = t;
    return (hash) => pre + hash + post;
  }
  return (hash, index) => {
    let s = "";
    for (const piece of t) s += piece === HEX ? hash : piece === INDEX ? String(index) : piece;
    return s;
  };
}

function presetLayout(preset: KeyFormatPreset, p: Params, problems: string[]): Layout | null {
  switch (preset) {
    case "llumnix":
      return llumnixLayout(p);
    case "vllm-mooncake-store":
      return vllmMooncakeStoreLayout(p, problems);
    case "lmcache":
      return lmcacheLayout(p, problems);
    case "sglang-hicache":
      return sglangHicacheLayout(p);
  }
}

function llumnixLayout(p: Params): Layout {
  // Llumnix HybridConnector writes `{hex}_{tp_rank}`; its own lookup asks for rank 0 only.
  const key = (tp: number): Template => ["", HEX, `_${tp}`];
  return { primary: key(p.tpRank), all: range(p.tpSize).map(key) };
}

function vllmMooncakeStoreLayout(p: Params, problems: string[]): Layout | null {
  if (p.model === undefined) {
    problems.push(
      `keyFormat "vllm-mooncake-store" needs model (the engine's --model; keys use its last path component)`,
    );
    return null;
  }
  // vLLM KeyMetadata/PoolKey. `@group:{g}` exists only in newer vLLM (always written there,
  // 0 for single-group models): set `group` to match. With MLA every TP rank holds the same
  // bytes and newer vLLM keys them all as tp_rank:0.
  const prefix = p.cachePrefix ? `${p.cachePrefix}@` : "";
  const group = p.group === undefined ? "" : `@group:${p.group}`;
  const key = (tp: number, pp: number): Template => [
    `${prefix}${basename(p.model!)}@tp_rank:${tp}@pcp0@dcp0@pp_rank:${pp}${group}@`,
    HEX,
    "",
  ];
  const pps = range(p.ppSize);
  const shards = p.mla ? [0] : range(p.tpSize);
  return {
    primary: key(p.mla ? 0 : p.tpRank, p.ppRank),
    all: shards.flatMap((tp) => pps.map((pp) => key(tp, pp))),
  };
}

function lmcacheLayout(p: Params, problems: string[]): Layout | null {
  const missing = [p.model === undefined && "model", p.dtype === undefined && "dtype"]
    .filter(Boolean);
  if (missing.length > 0) {
    problems.push(
      `keyFormat "lmcache" needs ${missing.join(" and ")} (keys are ` +
        `{model}@{world_size}@{worker_id}@{hex}@{dtype}, e.g. dtype "bfloat16")`,
    );
    return null;
  }
  // LMCache CacheEngineKey. With MLA only the first rank saves (save_only_first_rank) and the
  // key's world_size collapses to 1.
  const ws = p.mla ? 1 : p.worldSize;
  const key = (worker: number): Template => [
    `${p.model}@${ws}@${worker}@`,
    HEX,
    `@${p.dtype}`,
  ];
  return {
    primary: key(p.mla ? 0 : p.workerId),
    all: (p.mla ? [0] : range(p.worldSize)).map(key),
  };
}

function sglangHicacheLayout(p: Params): Layout {
  // SGLang MooncakeStore: `[{tag}_][{model with / as -}_]{hex}` then a per-rank suffix,
  // MHA `_{tp}[_{pp}]_k` and `_v`, MLA `_[{pp}]_k` (so `{hex}__k` without PP). The `_{pp}`
  // part is written only when pp_size > 1.
  const parts = [p.tag, p.model === undefined ? undefined : p.model.split("/").join("-")]
    .filter((s): s is string => Boolean(s));
  const prefix = parts.length > 0 ? `${parts.join("_")}_` : "";
  const ppPart = (pp: number) => (p.ppSize > 1 ? `_${pp}` : "");
  const pps = range(p.ppSize);
  if (p.mla) {
    const key = (pp: number): Template => [prefix, HEX, `_${ppPart(pp).slice(1)}_k`];
    return { primary: key(p.ppRank), all: pps.map(key) };
  }
  const key = (tp: number, pp: number, kv: "k" | "v"): Template => [
    prefix,
    HEX,
    `_${tp}${ppPart(pp)}_${kv}`,
  ];
  return {
    primary: key(p.tpRank, p.ppRank, "k"),
    all: range(p.tpSize).flatMap((tp) => pps.flatMap((pp) => [key(tp, pp, "k"), key(tp, pp, "v")])),
  };
}

function templateLayout(template: string, p: Params, problems: string[]): Layout | null {
  const before = problems.length;
  const tokens = template.split(/(\{[^{}]*\})/);
  const used = templatePlaceholders(template, tokens, problems);
  checkTemplateOptions(used, p, problems);
  if (problems.length > before) return null;

  const build = (tp: number, pp: number, worker: number): Template =>
    templatePieces(tokens, placeholderValues(p, tp, pp, worker));
  const tps = used.has("tp_rank") ? range(p.tpSize) : [p.tpRank];
  const pps = used.has("pp_rank") ? range(p.ppSize) : [p.ppRank];
  const workers = used.has("worker_id") ? range(p.worldSize) : [p.workerId];
  return {
    primary: build(p.tpRank, p.ppRank, p.workerId),
    all: tps.flatMap((tp) => pps.flatMap((pp) => workers.map((w) => build(tp, pp, w)))),
  };
}

/** The placeholder names a template uses; reports unknown ones and a missing `{hex}`. */
function templatePlaceholders(
  template: string,
  tokens: readonly string[],
  problems: string[],
): Set<string> {
  const used = new Set<string>();
  for (const t of tokens) {
    if (!t.startsWith("{") || !t.endsWith("}")) continue;
    const name = t.slice(1, -1);
    if (!TEMPLATE_PLACEHOLDERS.includes(name)) {
      problems.push(
        `Key template ${JSON.stringify(template)} uses unknown placeholder ${t}: ` +
          `use ${TEMPLATE_PLACEHOLDERS.map((n) => `{${n}}`).join(", ")}`,
      );
    }
    used.add(name);
  }
  if (!used.has("hex")) {
    problems.push(
      `keyFormat ${JSON.stringify(template)} is neither a preset (${
        KEY_FORMAT_PRESETS.join(", ")
      }) nor a template containing {hex}`,
    );
  }
  return used;
}

/** Reports placeholders whose option is not set. */
function checkTemplateOptions(used: ReadonlySet<string>, p: Params, problems: string[]): void {
  const needs: [string, string, unknown][] = [
    ["model", "model", p.model],
    ["model_basename", "model", p.model],
    ["model_dashed", "model", p.model],
    ["dtype", "dtype", p.dtype],
    ["tag", "tag", p.tag],
    ["cache_prefix", "cachePrefix", p.cachePrefix],
    ["group", "group", p.group],
  ];
  for (const [name, option, value] of needs) {
    if (used.has(name) && value === undefined) {
      problems.push(`Key template uses {${name}} but option ${option} is not set`);
    }
  }
}

/** Every placeholder's text for one rank (`hex` and `i` are filled per chunk). */
function placeholderValues(
  p: Params,
  tp: number,
  pp: number,
  worker: number,
): Record<string, string> {
  return {
    model: p.model ?? "",
    model_basename: p.model === undefined ? "" : basename(p.model),
    model_dashed: p.model === undefined ? "" : p.model.split("/").join("-"),
    tp_rank: String(tp),
    pp_rank: String(pp),
    worker_id: String(worker),
    tp_size: String(p.tpSize),
    pp_size: String(p.ppSize),
    world_size: String(p.worldSize),
    dtype: p.dtype ?? "",
    tag: p.tag ?? "",
    cache_prefix: p.cachePrefix ?? "",
    group: p.group === undefined ? "" : String(p.group),
  };
}

/** The template with rank placeholders filled in, literal runs merged. */
function templatePieces(tokens: readonly string[], values: Record<string, string>): Template {
  // Merged runs give the common `prefix{hex}suffix` shape the fast renderer.
  const pieces: Piece[] = [""];
  for (const t of tokens) {
    const name = t.startsWith("{") && t.endsWith("}") ? t.slice(1, -1) : null;
    if (name === "hex") pieces.push(HEX, "");
    else if (name === "i") pieces.push(INDEX, "");
    else pieces[pieces.length - 1] += name === null ? t : values[name];
  }
  return pieces;
}

/** Defaults and checks for the numeric and string parameters (invalid ones fall back to defaults). */
function resolveParams(o: KeyFormatOptions, problems: string[]): Params {
  const count = (name: string, v: unknown, min: number): number | undefined => {
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v) || v < min) {
      problems.push(`${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
      return undefined;
    }
    return v;
  };
  const text = (name: string, v: unknown): string | undefined => {
    if (v === undefined) return undefined;
    if (typeof v !== "string") {
      problems.push(`${name} must be a string, got ${typeof v}`);
      return undefined;
    }
    return v;
  };
  const flag = (name: string, v: unknown): boolean => {
    if (v !== undefined && typeof v !== "boolean") {
      problems.push(`${name} must be true or false, got ${JSON.stringify(v)}`);
    }
    return v === true;
  };
  const tpSize = count("tpSize", o.tpSize, 1) ?? 1;
  const ppSize = count("ppSize", o.ppSize, 1) ?? 1;
  const worldSize = count("worldSize", o.worldSize, 1) ?? tpSize * ppSize;
  const tpRank = count("tpRank", o.tpRank, 0) ?? 0;
  const ppRank = count("ppRank", o.ppRank, 0) ?? 0;
  const workerId = count("workerId", o.workerId, 0) ?? 0;
  const group = count("group", o.group, 0);
  if (tpRank >= tpSize) {
    problems.push(`tpRank (${tpRank}) must be < tpSize (${tpSize}): set tpSize`);
  }
  if (ppRank >= ppSize) {
    problems.push(`ppRank (${ppRank}) must be < ppSize (${ppSize}): set ppSize`);
  }
  if (workerId >= worldSize) {
    problems.push(`workerId (${workerId}) must be < worldSize (${worldSize}): set worldSize`);
  }
  const params: Params = {
    model: text("model", o.model),
    dtype: text("dtype", o.dtype),
    tag: text("tag", o.tag),
    cachePrefix: text("cachePrefix", o.cachePrefix),
    group,
    tpRank,
    ppRank,
    tpSize,
    ppSize,
    worldSize,
    workerId,
    mla: flag("mla", o.mla),
  };
  flag("requireAllRanks", o.requireAllRanks);
  if (params.model !== undefined && params.model.trim() === "") problems.push("model is empty");
  return params;
}

/** vLLM: `model.rstrip("/").split("/")[-1]`. */
function basename(model: string): string {
  const parts = model.replace(/\/+$/, "").split("/");
  return parts[parts.length - 1];
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

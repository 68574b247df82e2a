import {
  basename,
  HEX,
  INDEX,
  type Layout,
  type Params,
  type Piece,
  range,
  type Template,
} from "./key_layout.ts";
import { resolveParams } from "./key_params.ts";
import { llumnixLayout, lmcacheLayout, sglangHicacheLayout } from "./preset_layouts.ts";
import type { KeyFormatPreset, KeySchemeOptions } from "./types.ts";
import { vllmMooncakeStoreLayout } from "./vllm_store_layout.ts";

/** The options that shape store keys (everything but the chain; `hash` only picks variants). */
export type KeyFormatOptions =
  & Partial<Pick<KeySchemeOptions, "hash">>
  & Pick<
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
    | "numKvHeads"
    | "dcpSize"
    | "pcpSize"
    | "groups"
    | "tpLcmSize"
    | "lmcacheTags"
    | "requireAllRanks"
  >;

/**
 * Turns chunk hashes (hex, or decimal for xxh64_cumulative) into store keys. `lastUnfull` says
 * the last hash is of an unfull chunk (saveUnfullChunk), which some layouts key differently.
 */
export interface KeyFormatter {
  /** The primary key of each chunk. */
  keys(hashes: readonly string[], lastUnfull?: boolean): string[];
  /** Every key each chunk needs; `result[i][0]` is `keys(hashes)[i]`. */
  chunkKeys(hashes: readonly string[], lastUnfull?: boolean): string[][];
}

export const KEY_FORMAT_PRESETS: readonly KeyFormatPreset[] = [
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
    problems.push(...inapplicableOptions(options, keyFormat));
    layout = (KEY_FORMAT_PRESETS as readonly string[]).includes(keyFormat)
      ? presetLayout(keyFormat as KeyFormatPreset, params, problems)
      : templateLayout(keyFormat, params, problems);
  }
  if (layout !== null) problems.push(...commaProblems(layout));
  if (layout === null || problems.length > 0) return { formatter: null, problems };

  const full = renderLayout(layout, options.requireAllRanks === true);
  const unfull = layout.unfull
    ? renderLayout(layout.unfull, options.requireAllRanks === true)
    : full;
  const pick = (i: number, n: number, lastUnfull: boolean | undefined) =>
    lastUnfull && i === n - 1 ? unfull : full;
  return {
    formatter: {
      keys: (hashes, lastUnfull) =>
        hashes.map((h, i) => pick(i, hashes.length, lastUnfull).primary(h, i)),
      chunkKeys: (hashes, lastUnfull) =>
        hashes.map((h, i) => pick(i, hashes.length, lastUnfull).all.map((key) => key(h, i))),
    },
    problems: [],
  };
}

type Render = (hash: string, index: number) => string;

/** The primary renderer and every key's renderer (primary first, no duplicates). */
function renderLayout(
  layout: Layout,
  requireAllRanks: boolean,
): { primary: Render; all: Render[] } {
  const list = requireAllRanks ? layout.all : layout.required ?? [layout.primary];
  const seen = new Set([JSON.stringify(layout.primary)]);
  const rest = list.filter((t) => {
    const id = JSON.stringify(t);
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
  const primary = render(layout.primary);
  return { primary, all: [primary, ...rest.map(render)] };
}

/** No key may contain a comma: Mooncake's batch_query_keys splits on them (docs/compat.md §4). */
function commaProblems(layout: Layout): string[] {
  const templates = [layout.primary, ...layout.all, ...(layout.required ?? [])];
  if (layout.unfull) templates.push(layout.unfull.primary, ...layout.unfull.all);
  for (const t of templates) {
    for (const piece of t) {
      if (typeof piece === "string" && piece.includes(",")) {
        return [
          `Keys would contain a comma (${JSON.stringify(piece)}): Mooncake's ` +
          `batch_query_keys joins keys with commas, so no key may contain one`,
        ];
      }
    }
  }
  return [];
}

/** Options only one preset reads: set anywhere else they would do nothing, so they are refused. */
function inapplicableOptions(options: KeyFormatOptions, keyFormat: string): string[] {
  const owners: [keyof KeyFormatOptions, string][] = [
    ["numKvHeads", "vllm-mooncake-store"],
    ["dcpSize", "vllm-mooncake-store"],
    ["pcpSize", "vllm-mooncake-store"],
    ["groups", "vllm-mooncake-store"],
    ["tpLcmSize", "sglang-hicache"],
    ["lmcacheTags", "lmcache"],
  ];
  return owners
    .filter(([name, owner]) => options[name] !== undefined && keyFormat !== owner)
    .map(([name, owner]) => `${name} applies to keyFormat "${owner}" only: drop it`);
}

/** A fast renderer for the common `prefix + hash + suffix` shape, generic otherwise. */
function render(t: Template): Render {
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

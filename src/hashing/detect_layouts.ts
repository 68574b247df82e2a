import { basename } from "./key_layout.ts";
import { LMCACHE_KEY, SGLANG_KEY, VLLM_KEY } from "./key_shapes.ts";
import type { KeySchemeOptions } from "./types.ts";

/** The key-layout half of a candidate scheme: `keyFormat` and the options its keys depend on. */
export type LayoutChoice =
  & Pick<KeySchemeOptions, "keyFormat">
  & Partial<
    Pick<
      KeySchemeOptions,
      "model" | "worldSize" | "dtype" | "tag" | "cachePrefix" | "group" | "mla" | "lmcacheTags"
    >
  >;

/** How many distinct layouts one store sample may add (a bound on the probe's size). */
const MAX_SAMPLED_LAYOUTS = 32;
const LMCACHE_DTYPES = ["bfloat16", "half"];
const WORLD_SIZES = [1, 2, 4, 8];

/** The model as given, its basename and its dashed spelling, distinct. */
function modelSpellings(model: string): string[] {
  return [...new Set([model, basename(model), model.split("/").join("-")])];
}

/**
 * Layouts worth probing: the configured one, each preset with the usual values (model spellings,
 * LMCache dtypes and world sizes, SGLang with and without model, tag and MLA), and the exact
 * layouts read from a sample of the store's keys (tags and prefixes cannot be guessed).
 */
export function layoutCandidates(
  configured: KeySchemeOptions,
  model: string,
  sampleKeys: readonly string[] = [],
): LayoutChoice[] {
  const spellings = modelSpellings(model);
  const list: LayoutChoice[] = [configuredLayout(configured)];
  list.push(...sampledLayouts(sampleKeys, spellings));
  list.push({ keyFormat: "llumnix" });
  const cachePrefix = configured.cachePrefix;
  for (const group of [undefined, 0]) {
    list.push(pruned({ keyFormat: "vllm-mooncake-store", model, cachePrefix, group }));
  }
  const dtypes = [...new Set([configured.dtype, ...LMCACHE_DTYPES].filter((d) => d))];
  const sizes = [...new Set([configured.worldSize ?? configured.tpSize ?? 1, ...WORLD_SIZES])];
  for (const dtype of dtypes) {
    for (const m of spellings.slice(0, 2)) {
      for (const worldSize of sizes) {
        list.push({ keyFormat: "lmcache", model: m, dtype, worldSize });
      }
    }
  }
  for (const tag of [undefined, configured.tag]) {
    for (const m of [undefined, ...spellings]) {
      for (const mla of [undefined, true]) {
        list.push(pruned({ keyFormat: "sglang-hicache", tag, model: m, mla }));
      }
    }
  }
  return distinct(list);
}

/** The configured scheme's layout options (a custom template keeps every option it may use). */
function configuredLayout(o: KeySchemeOptions): LayoutChoice {
  const { keyFormat, model, worldSize, dtype, tag, cachePrefix, group, mla, lmcacheTags } = o;
  return pruned({ keyFormat, model, worldSize, dtype, tag, cachePrefix, group, mla, lmcacheTags });
}

/** The layouts a sample of store keys shows, with their literal parts. */
function sampledLayouts(keys: readonly string[], spellings: string[]): LayoutChoice[] {
  const found = new Map<string, LayoutChoice>();
  for (const key of keys) {
    const layout = layoutOfKey(key, spellings);
    if (layout === undefined) continue;
    found.set(JSON.stringify(layout), layout);
    if (found.size >= MAX_SAMPLED_LAYOUTS) break;
  }
  return [...found.values()];
}

function layoutOfKey(key: string, spellings: string[]): LayoutChoice | undefined {
  const vllm = VLLM_KEY.exec(key);
  if (vllm) {
    const model = spellings.find((s) => basename(s) === vllm[2]) ?? vllm[2];
    return pruned({
      keyFormat: "vllm-mooncake-store",
      model,
      cachePrefix: vllm[1],
      group: vllm[3] === undefined ? undefined : Number(vllm[3].slice("@group:".length)),
    });
  }
  const lm = LMCACHE_KEY.exec(key);
  if (lm) {
    const tags = [...lm[6].matchAll(/@([^@%]+)%([^@]*)/g)].map((m) => [m[1], m[2]]);
    return pruned({
      keyFormat: "lmcache",
      model: lm[1],
      worldSize: Number(lm[2]),
      dtype: lm[5],
      lmcacheTags: tags.length > 0 ? Object.fromEntries(tags) : undefined,
    });
  }
  const sg = SGLANG_KEY.exec(key);
  if (sg) {
    return pruned({
      keyFormat: "sglang-hicache",
      ...sglangPrefix(sg[1], spellings),
      mla: sg[3] === "" || undefined,
    });
  }
  return undefined;
}

/** SGLang's `[{tag}_][{model}_]` prefix split into tag and model where a spelling fits. */
function sglangPrefix(prefix: string | undefined, spellings: string[]): Partial<LayoutChoice> {
  if (prefix === undefined) return {};
  for (const spelling of spellings) {
    const dashed = spelling.split("/").join("-");
    if (prefix === dashed) return { model: spelling };
    if (prefix.endsWith(`_${dashed}`)) {
      return { tag: prefix.slice(0, -dashed.length - 1), model: spelling };
    }
  }
  return { tag: prefix };
}

/** A choice without its unset fields (so that equal choices print and compare alike). */
export function pruned<T extends object>(choice: T): T {
  return Object.fromEntries(Object.entries(choice).filter(([, v]) => v !== undefined)) as T;
}

function distinct(list: LayoutChoice[]): LayoutChoice[] {
  const seen = new Map<string, LayoutChoice>();
  for (const layout of list) {
    const id = JSON.stringify(layout);
    if (!seen.has(id)) seen.set(id, layout);
  }
  return [...seen.values()];
}

import { lmcacheDtype, unknownDtypeProblem } from "./lmcache_dtype.ts";
import { HEX, type Layout, type Params, range, type Template } from "./key_layout.ts";

/**
 * Llumnix HybridConnector writes `{hex}_{tp_rank}` and asks rank 0 only. Its TokenHasher in
 * `sha256_hex` mode keys full chunks as the bare `{hex}` and suffixes `_0` on an unfull last
 * chunk only (docs/compat.md §3).
 */
export function llumnixLayout(p: Params): Layout {
  const key = (tp: number): Template => ["", HEX, `_${tp}`];
  const ranked: Layout = { primary: key(p.tpRank), all: range(p.tpSize).map(key) };
  if (p.hash !== "sha256_hex") return ranked;
  const bare: Template = ["", HEX, ""];
  return { primary: bare, all: [bare], unfull: ranked };
}

/**
 * LMCache CacheEngineKey `{model}@{world_size}@{worker_id}@{hex}@{dtype}[@{tag}%{value}...]`,
 * dtype spelled LMCache's way. With MLA only the first rank saves and world_size becomes 1.
 */
export function lmcacheLayout(p: Params, problems: string[]): Layout | null {
  const missing = [p.model === undefined && "model", p.dtype === undefined && "dtype"]
    .filter(Boolean);
  if (missing.length > 0) {
    problems.push(
      `keyFormat "lmcache" needs ${missing.join(" and ")} (keys are ` +
        `{model}@{world_size}@{worker_id}@{hex}@{dtype}, e.g. dtype "bfloat16")`,
    );
    return null;
  }
  const dtype = lmcacheDtype(p.dtype!);
  if (dtype === undefined) {
    problems.push(unknownDtypeProblem(p.dtype!));
    return null;
  }
  const tags = p.lmcacheTags.map(([name, value]) => `@${name}%${value}`).join("");
  const ws = p.mla ? 1 : p.worldSize;
  const key = (
    worker: number,
  ): Template => [`${p.model}@${ws}@${worker}@`, HEX, `@${dtype}${tags}`];
  return {
    primary: key(p.mla ? 0 : p.workerId),
    all: (p.mla ? [0] : range(p.worldSize)).map(key),
  };
}

/**
 * SGLang HiCache MooncakeStore: `[{tag}_][{model with / as -}_]{hex}` then a per-rank suffix,
 * MHA `_{rank}[_{pp}]_k` and `_v`, MLA `_[{pp}]_k`; `_{pp}` only when pp_size > 1. A set tag adds
 * its `_` even when empty (SGLang tests `is not None`). With tpLcmSize > tpSize rank r writes
 * the keys of ranks r·k … r·k+k−1, k = tpLcmSize / tpSize (split heads).
 */
export function sglangHicacheLayout(p: Params): Layout {
  const parts = [
    ...(p.tag !== undefined ? [p.tag] : []),
    ...(p.model ? [p.model.split("/").join("-")] : []),
  ];
  const prefix = parts.length > 0 ? `${parts.join("_")}_` : "";
  const ppPart = (pp: number) => (p.ppSize > 1 ? `_${pp}` : "");
  const pps = range(p.ppSize);
  if (p.mla) {
    const key = (pp: number): Template => [prefix, HEX, `_${ppPart(pp).slice(1)}_k`];
    return { primary: key(p.ppRank), all: pps.map(key) };
  }
  const split = p.tpLcmSize !== undefined && p.tpLcmSize > p.tpSize ? p.tpLcmSize / p.tpSize : 1;
  const key = (rank: number, pp: number, kv: "k" | "v"): Template => [
    prefix,
    HEX,
    `_${rank}${ppPart(pp)}_${kv}`,
  ];
  return {
    primary: key(p.tpRank * split, p.ppRank, "k"),
    all: range(p.tpSize * split).flatMap((r) =>
      pps.flatMap((pp) => [key(r, pp, "k"), key(r, pp, "v")])
    ),
  };
}

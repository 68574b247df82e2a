import type { Params } from "./key_layout.ts";
import type { KeySchemeOptions, KvGroupKind } from "./types.ts";

const GROUP_KINDS: readonly KvGroupKind[] = ["attention", "mla", "mamba"];

/** Reporters for one option type: each records a problem and returns undefined when invalid. */
function readers(problems: string[]) {
  return {
    count(name: string, v: unknown, min: number): number | undefined {
      if (v === undefined) return undefined;
      if (typeof v !== "number" || !Number.isInteger(v) || v < min) {
        problems.push(`${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
        return undefined;
      }
      return v;
    },
    text(name: string, v: unknown): string | undefined {
      if (v === undefined) return undefined;
      if (typeof v !== "string") {
        problems.push(`${name} must be a string, got ${typeof v}`);
        return undefined;
      }
      return v;
    },
    flag(name: string, v: unknown): boolean {
      if (v !== undefined && typeof v !== "boolean") {
        problems.push(`${name} must be true or false, got ${JSON.stringify(v)}`);
      }
      return v === true;
    },
  };
}

/** Defaults and checks for the key options (invalid ones fall back to defaults). */
export function resolveParams(o: Partial<KeySchemeOptions>, problems: string[]): Params {
  const { count, text, flag } = readers(problems);
  const tpSize = count("tpSize", o.tpSize, 1) ?? 1;
  const ppSize = count("ppSize", o.ppSize, 1) ?? 1;
  const worldSize = count("worldSize", o.worldSize, 1) ?? tpSize * ppSize;
  const tpRank = count("tpRank", o.tpRank, 0) ?? 0;
  const ppRank = count("ppRank", o.ppRank, 0) ?? 0;
  const workerId = count("workerId", o.workerId, 0) ?? 0;
  for (
    const [rank, size, r, s] of [["tpRank", "tpSize", tpRank, tpSize], [
      "ppRank",
      "ppSize",
      ppRank,
      ppSize,
    ], ["workerId", "worldSize", workerId, worldSize]] as const
  ) {
    if (r >= s) problems.push(`${rank} (${r}) must be < ${size} (${s}): set ${size}`);
  }
  const params: Params = {
    hash: o.hash,
    model: text("model", o.model),
    dtype: text("dtype", o.dtype),
    tag: text("tag", o.tag),
    cachePrefix: text("cachePrefix", o.cachePrefix),
    group: count("group", o.group, 0),
    tpRank,
    ppRank,
    tpSize,
    ppSize,
    worldSize,
    workerId,
    mla: flag("mla", o.mla),
    ...parallelParams(o, tpSize, problems),
  };
  flag("requireAllRanks", o.requireAllRanks);
  if (params.model !== undefined && params.model.trim() === "") problems.push("model is empty");
  return params;
}

/** GQA, context-parallel, group and split-head options (docs/compat.md §3). */
function parallelParams(o: Partial<KeySchemeOptions>, tpSize: number, problems: string[]) {
  const { count } = readers(problems);
  const numKvHeads = count("numKvHeads", o.numKvHeads, 1);
  if (numKvHeads !== undefined && tpSize > numKvHeads && tpSize % numKvHeads !== 0) {
    problems.push(
      `tpSize (${tpSize}) must be a multiple of numKvHeads (${numKvHeads}), as vLLM requires`,
    );
  }
  const dcpSize = count("dcpSize", o.dcpSize, 1) ?? 1;
  if (tpSize % dcpSize !== 0) {
    problems.push(`dcpSize (${dcpSize}) must divide tpSize (${tpSize}): DCP subdivides TP`);
  }
  const tpLcmSize = count("tpLcmSize", o.tpLcmSize, 1);
  if (tpLcmSize !== undefined && tpLcmSize % tpSize !== 0) {
    problems.push(`tpLcmSize (${tpLcmSize}) must be a multiple of tpSize (${tpSize})`);
  }
  return {
    numKvHeads,
    dcpSize,
    pcpSize: count("pcpSize", o.pcpSize, 1) ?? 1,
    groups: groupKinds(o, problems),
    tpLcmSize,
    lmcacheTags: tagList(o.lmcacheTags, problems),
  };
}

/** `groups`: a count (every group of the `mla` kind or attention) or each group's kind. */
function groupKinds(o: Partial<KeySchemeOptions>, problems: string[]): KvGroupKind[] | undefined {
  const { groups, group } = o;
  if (groups === undefined) return undefined;
  let kinds: KvGroupKind[] | undefined;
  if (typeof groups === "number" && Number.isInteger(groups) && groups >= 1) {
    kinds = Array.from({ length: groups }, () => (o.mla ? "mla" : "attention"));
  } else if (
    Array.isArray(groups) && groups.length > 0 && groups.every((k) => GROUP_KINDS.includes(k))
  ) {
    kinds = [...groups];
  } else {
    problems.push(
      `groups must be a count >= 1 or a list of ${GROUP_KINDS.join(" / ")}, got ${
        JSON.stringify(groups)
      }`,
    );
    return undefined;
  }
  if (typeof group === "number" && group >= kinds.length) {
    problems.push(`group (${group}) must be < the number of groups (${kinds.length})`);
  }
  return kinds;
}

/** `lmcacheTags` as ordered [name, value] pairs. */
function tagList(tags: unknown, problems: string[]): [string, string][] {
  if (tags === undefined) return [];
  const entries = tags !== null && typeof tags === "object" && !Array.isArray(tags)
    ? Object.entries(tags)
    : null;
  if (entries === null || entries.some(([, v]) => typeof v !== "string")) {
    problems.push(`lmcacheTags must be an object of string values, got ${JSON.stringify(tags)}`);
    return [];
  }
  return entries as [string, string][];
}

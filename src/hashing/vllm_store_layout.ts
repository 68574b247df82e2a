import { basename, HEX, type Layout, type Params, range, type Template } from "./key_layout.ts";
import type { KvGroupKind } from "./types.ts";

/** One KV-cache group: the id in its keys and its kind. */
interface Group {
  id: number;
  kind: KvGroupKind;
}

/**
 * vLLM v1 `MooncakeStoreConnector` keys (docs/compat.md §3):
 * `[{cachePrefix}@]{basename}@tp_rank:{t}@pcp{c}@dcp{d}@pp_rank:{p}[@group:{g}]@{hex}`, one key
 * per KV-cache group. Ranks holding byte-identical KV share a key: `t` is the TP rank divided
 * by the group's replication factor; `d` is tp_rank % dcpSize.
 */
export function vllmMooncakeStoreLayout(p: Params, problems: string[]): Layout | null {
  if (p.model === undefined) {
    problems.push(
      `keyFormat "vllm-mooncake-store" needs model (the engine's --model; keys use its last path component)`,
    );
    return null;
  }
  const prefix = p.cachePrefix ? `${p.cachePrefix}@` : "";
  // Newer vLLM always writes `@group:` (0 for one group); older builds have none.
  const writeGroup = p.groups !== undefined || p.group !== undefined;
  const key = (tp: number, pcp: number, dcp: number, pp: number, g: number): Template => [
    `${prefix}${basename(p.model!)}@tp_rank:${tp}@pcp${pcp}@dcp${dcp}@pp_rank:${pp}` +
    `${writeGroup ? `@group:${g}` : ""}@`,
    HEX,
    "",
  ];
  const groups = kvGroups(p);
  const primaryOf = (g: Group) =>
    key(
      Math.floor(p.tpRank / replication(p, g.kind)),
      0,
      p.dcpSize > 1 ? p.tpRank % p.dcpSize : 0,
      p.ppRank,
      g.id,
    );
  const primaryGroup = groups.find((g) => g.id === (p.group ?? 0)) ?? groups[0];
  return {
    primary: primaryOf(primaryGroup),
    all: groups.flatMap((g) =>
      rankNamespaces(p, replication(p, g.kind)).map(([t, c, d, pp]) => key(t, c, d, pp, g.id))
    ),
    required: groups.map(primaryOf),
  };
}

/** The groups keys are written for: `groups` when set, else the one group `group` (or 0). */
function kvGroups(p: Params): Group[] {
  if (p.groups === undefined) return [{ id: p.group ?? 0, kind: p.mla ? "mla" : "attention" }];
  return p.groups.map((kind, id) => ({ id, kind }));
}

/**
 * vLLM's `_spec_tp_replication_factor`: how many TP ranks hold the same bytes. DCP and Mamba
 * state are per rank; MLA is the same on every rank; GQA heads repeat tpSize / numKvHeads times.
 */
function replication(p: Params, kind: KvGroupKind): number {
  if (p.dcpSize > 1 || kind === "mamba") return 1;
  if (kind === "mla") return p.tpSize;
  return p.numKvHeads === undefined ? 1 : Math.max(1, Math.floor(p.tpSize / p.numKvHeads));
}

/** vLLM's `_init_lookup_key_prefixes`: every (tp, pcp, dcp, pp) key namespace, in its order. */
function rankNamespaces(p: Params, factor: number): [number, number, number, number][] {
  const pps = range(p.ppSize);
  if (p.dcpSize > 1) {
    return range(p.pcpSize).flatMap((c) =>
      range(p.tpSize).flatMap((t) => pps.map((pp) => [t, c, t % p.dcpSize, pp]))
    ) as [number, number, number, number][];
  }
  return range(p.pcpSize).flatMap((c) =>
    range(Math.floor(p.tpSize / factor)).flatMap((s) => pps.map((pp) => [s, c, 0, pp]))
  ) as [number, number, number, number][];
}

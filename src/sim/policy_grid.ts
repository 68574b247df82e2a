/**
 * The policy grid: every policy on a grid of workloads nobody tuned on (skewed documents over
 * Zipf exponents, document counts, cache sizes, loads, with and without the store's pool, and
 * the recorded conversation trace), averaged over seeds, each cell beside its floor (the same
 * workload at a twentieth of the load: no queueing) and judged against issue #24's targets.
 */
import { DEFAULT_DECODE_MODEL } from "../scheduling/decode_model.ts";
import { MOONCAKE_PREFILL_MODEL, prefillTimeS } from "../scheduling/prefill_model.ts";
import { parsePolicySpec } from "../scheduling/policy_spec.ts";
import { resolveTtftParams } from "../scheduling/registry.ts";
import { type KvPoolMode, type SimConfig, simulate } from "./simulator.ts";
import { summarize } from "./summary.ts";
import type { TraceRequest } from "./trace.ts";
import { generateWorkload, parseWorkloadSpec } from "./workloads.ts";

/** One cell: a workload (generated, or a recorded trace), a cache size, a load, a pool mode. */
export interface GridCell {
  name: string;
  /** A workload spec (workloads.ts) without its rate, or "trace" for the recorded trace. */
  workload: string;
  /** Per-instance cache as a fraction of the working set split over the instances. */
  cacheFraction: number;
  /** Arrival rate in multiples of the no-cache capacity (noCacheCapacityRps). */
  load: number;
  pool: KvPoolMode;
}

export interface GridOptions {
  cells: GridCell[];
  seeds: number[];
  policies: string[];
  /** The peers' policies: the best of them is the bar. */
  peers: string[];
  /** The policy judged against the targets (a policy spec: `name[:key=value&...]`). */
  candidate: string;
  /** The candidate with late binding at this bound (`PolicyRun.holdAboveTokens`); peers never. */
  candidateHoldAboveTokens?: number;
  /** What each engine iteration costs besides its tokens (`SimConfig.engineStepS`, default 0). */
  engineStepS?: number;
  instances: number;
  requests: number;
  /** The recorded trace, for "trace" cells. */
  trace?: readonly TraceRequest[];
}

export interface PolicyCell {
  meanTtftS: number;
  p99TtftS: number;
  hitRatio: number;
}

export interface CellResult {
  cell: GridCell;
  /** The best policy's mean TTFT at a twentieth of the load. */
  floorS: number;
  /**
   * That run's hit ratio: where a policy under load hits as often, its placement is as good as
   * the idle one and what separates it from the floor is queueing.
   */
  floorHitRatio: number;
  policies: Record<string, PolicyCell>;
  bestPeer: string;
  /** The candidate met the target in this cell (mean and p99). */
  meanMet: boolean;
  p99Met: boolean;
}

const BLOCK_TOKENS = 512;

/** The arrival rate at which the cluster would be exactly busy recomputing every prompt. */
export function noCacheCapacityRps(trace: readonly TraceRequest[], instances: number): number {
  const meanS = trace.reduce((s, r) => s + prefillTimeS(MOONCAKE_PREFILL_MODEL, r.inputLength), 0) /
    trace.length;
  return instances / meanS;
}

/** The simulator's defaults (cli/sim.ts) for one cell. */
export function cellConfig(
  cell: GridCell,
  trace: readonly TraceRequest[],
  options: { instances: number; seed: number; speed: number; engineStepS?: number },
): SimConfig {
  const workingSetBlocks = new Set(trace.flatMap((r) => r.hashIds)).size;
  const cacheBlocks = Math.max(
    1,
    Math.round(cell.cacheFraction * workingSetBlocks / options.instances),
  );
  return {
    instances: options.instances,
    cacheBlocks,
    chunkTokens: 8192,
    blockTokens: BLOCK_TOKENS,
    speed: options.speed,
    seed: options.seed,
    sloTtftS: 30,
    sloTbtS: 0.1,
    kvPool: cell.pool,
    ttft: resolveTtftParams({ prefillModel: MOONCAKE_PREFILL_MODEL }),
    engineModel: MOONCAKE_PREFILL_MODEL,
    heterogeneity: 0,
    ...(options.engineStepS ? { engineStepS: options.engineStepS } : {}),
    refine: true,
    decodeInstances: 0,
    decodeModel: { ...DEFAULT_DECODE_MODEL },
    loadThresholdTokens: Number.MAX_SAFE_INTEGER,
    timelinePoints: 2,
  };
}

/** The cell's trace for one seed, its arrivals spread at `load` × the no-cache capacity. */
export function cellTrace(
  cell: GridCell,
  seed: number,
  options: GridOptions,
): { trace: readonly TraceRequest[]; speed: number } {
  if (cell.workload === "trace") {
    const trace = options.trace!.slice(0, options.requests);
    const spanS = trace.at(-1)!.timestampMs / 1000;
    const rate = trace.length / Math.max(1e-9, spanS);
    return { trace, speed: cell.load * noCacheCapacityRps(trace, options.instances) / rate };
  }
  // Generated at 1 request/s, then sped up to the load.
  const spec = parseWorkloadSpec(`${cell.workload},rps=1,requests=${options.requests}`);
  const trace = generateWorkload(spec, seed, BLOCK_TOKENS);
  return { trace, speed: cell.load * noCacheCapacityRps(trace, options.instances) };
}

/** Every policy on one cell, averaged over the seeds, with the floor and the verdict. */
export function runCell(cell: GridCell, options: GridOptions): CellResult {
  const sums: Record<string, PolicyCell> = {};
  let floorSum = 0;
  let floorHitSum = 0;
  for (const seed of options.seeds) {
    const { trace, speed } = cellTrace(cell, seed, options);
    const config = (s: number) => cellConfig(cell, trace, { ...options, seed, speed: s });
    let floor = Number.POSITIVE_INFINITY;
    let floorHit = 0;
    for (const policy of options.policies) {
      const { name, params } = parsePolicySpec(policy);
      const run = {
        label: policy,
        policy: name,
        params,
        admission: "off" as const,
        holdAboveTokens: policy === options.candidate
          ? options.candidateHoldAboveTokens
          : undefined,
      };
      const loaded = summarize(simulate(trace, config(speed), run), 30);
      // The floor places on arrival: one floor per cell, whichever run is held.
      const placed = { ...run, holdAboveTokens: undefined };
      const idle = summarize(simulate(trace, config(speed / 20), placed), 30);
      if (idle.meanTtftS < floor) [floor, floorHit] = [idle.meanTtftS, idle.hitRatio];
      const sum = sums[policy] ??= { meanTtftS: 0, p99TtftS: 0, hitRatio: 0 };
      sum.meanTtftS += loaded.meanTtftS / options.seeds.length;
      sum.p99TtftS += loaded.p99TtftS / options.seeds.length;
      sum.hitRatio += loaded.hitRatio / options.seeds.length;
    }
    floorSum += floor / options.seeds.length;
    floorHitSum += floorHit / options.seeds.length;
  }
  return judge(cell, { meanTtftS: floorSum, hitRatio: floorHitSum }, sums, options);
}

/**
 * #24's targets: where the best peer is more than 15% above the floor, the candidate's mean TTFT
 * is at most 0.9× the peer's; elsewhere within 2% of it; and its p99 no worse than the peer's.
 */
export function judge(
  cell: GridCell,
  floor: Pick<PolicyCell, "meanTtftS" | "hitRatio">,
  policies: Record<string, PolicyCell>,
  options: Pick<GridOptions, "peers" | "candidate">,
): CellResult {
  const bestPeer = options.peers.reduce((best, p) =>
    policies[p].meanTtftS < policies[best].meanTtftS ? p : best
  );
  const peer = policies[bestPeer], candidate = policies[options.candidate];
  const floorS = floor.meanTtftS;
  const bar = peer.meanTtftS > 1.15 * floorS ? 0.9 * peer.meanTtftS : 1.02 * peer.meanTtftS;
  return {
    cell,
    floorS,
    floorHitRatio: floor.hitRatio,
    policies,
    bestPeer,
    meanMet: candidate.meanTtftS <= bar,
    p99Met: candidate.p99TtftS <= peer.p99TtftS * 1.0001,
  };
}

/**
 * The grid of #24: skewed documents over every axis, and the recorded trace, per pool mode (the
 * issue's grid: off and planned; `always` is engines loading the pool themselves, kv.poolLoads).
 */
export function defaultGrid(
  quick: boolean,
  pools: readonly KvPoolMode[] = ["off", "planned"],
): GridCell[] {
  const cells: GridCell[] = [];
  const zipfs = quick ? [1.1] : [0.8, 1.1, 1.4];
  const documents = quick ? [200] : [100, 1000];
  const caches = quick ? [0.05, 1] : [0.05, 0.25, 1];
  const loads = quick ? [1, 2] : [0.5, 1, 2];
  for (const pool of pools) {
    for (const zipf of zipfs) {
      for (const docs of documents) {
        for (const cache of caches) {
          for (const load of loads) {
            cells.push({
              name: `docs zipf ${zipf}, ${docs} docs, cache ${cache * 100}%, load ${load}×, ` +
                `pool ${pool}`,
              workload: `docs:documents=${docs},zipf=${zipf}`,
              cacheFraction: cache,
              load,
              pool,
            });
          }
        }
      }
    }
    for (const cache of quick ? [] : [0.05, 0.25, 1]) {
      for (const load of [0.5, 1, 2]) {
        cells.push({
          name: `conversation trace, cache ${cache * 100}%, load ${load}×, pool ${pool}`,
          workload: "trace",
          cacheFraction: cache,
          load,
          pool,
        });
      }
    }
  }
  return cells;
}

/**
 * The grid as a Markdown table: per cell, the floor, each policy's mean (p99), the verdict, and
 * the hit ratios of the floor, the best peer and the candidate.
 */
export function gridMarkdown(results: CellResult[], options: GridOptions): string[] {
  const lines = [
    `| cell | floor | ${
      options.policies.join(" | ")
    } | best peer | ${options.candidate} / peer | met | hits: floor / peer / ${options.candidate} |`,
    `|---|---:|${options.policies.map(() => "---:").join("|")}|---|---:|---|---:|`,
  ];
  for (const r of results) {
    const cells = options.policies.map((p) =>
      `${r.policies[p].meanTtftS.toFixed(2)} (${r.policies[p].p99TtftS.toFixed(1)})`
    );
    const ratio = r.policies[options.candidate].meanTtftS / r.policies[r.bestPeer].meanTtftS;
    const met = r.meanMet && r.p99Met ? "yes" : !r.meanMet ? "no (mean)" : "no (p99)";
    const hits = [
      r.floorHitRatio,
      r.policies[r.bestPeer].hitRatio,
      r.policies[options.candidate]
        .hitRatio,
    ].map((h) => h.toFixed(3)).join(" / ");
    lines.push(
      `| ${r.cell.name} | ${r.floorS.toFixed(2)} | ${cells.join(" | ")} | ${r.bestPeer} | ${
        ratio.toFixed(2)
      } | ${met} | ${hits} |`,
    );
  }
  return lines;
}

/**
 * `sim-grid`: every policy on the grid of workloads nobody tuned on (src/sim/policy_grid.ts),
 * averaged over held-out seeds, each cell beside its floor and judged against the targets.
 */
import { parseCommandArgs } from "./args.ts";
import { defaultGrid, gridMarkdown, runCell } from "../src/sim/policy_grid.ts";
import { parseMooncakeTrace } from "../src/sim/trace.ts";
import type { KvPoolMode } from "../src/sim/simulator.ts";
import { createPolicy, isPolicyName } from "../src/scheduling/registry.ts";
import { parsePolicySpec } from "../src/scheduling/policy_spec.ts";

const PEERS = ["dynamo_kv", "llmd_default", "sglang_cache_aware"];
const OURS = ["cache_aware", "kv_hit_len", "mooncake_ttft", "affinity_ttft"];
const TRACE = new URL("../tests/data/conversation_trace.jsonl", import.meta.url);

const USAGE = `Usage: deno task sim:grid [--quick] [--seeds LIST] [--requests N] [--candidate NAME]
                          [--candidate-hold TOKENS] [--pool off|planned|always]
                          [--engine-step-ms MS]
                          [--out FILE]

Replays every policy (peers: ${PEERS.join(", ")}; tidegate's: ${OURS.join(", ")}) on
the policy grid: skewed documents (Zipf 0.8/1.1/1.4, 100 or 1,000 documents of 20k tokens, cache
5/25/100% of the working set, load 0.5-2x of the no-cache capacity) and the recorded conversation
trace, with and without the store's pool, on 8 instances. Each cell is averaged over the seeds
and printed beside its floor (the best policy at a twentieth of the load) with the verdict for
the candidate (affinity_ttft). Takes about 12 minutes per seed on a quiet core; --quick: 8 cells,
1 seed.

  --seeds LIST     workload seeds, comma-separated (default 3,4,5: the held-out ones; the
                   duplication weight was chosen on 1,2)
  --requests N     requests per cell (default 2000)
  --candidate NAME the policy judged (default affinity_ttft); NAME:key=value&key=value gives it
                   parameters (e.g. affinity_ttft:duplicationWeight=1)
  --candidate-hold TOKENS
                   the candidate with late binding: while every instance has more prefill
                   tokens waiting than this, an arriving request is held and planned once one
                   has room (src/scheduling/late_binding.ts; the peers as they run)
  --pool MODE      only the cells with the pool off, or planned (default both), or the same
                   cells with every engine loading what the pool holds (always: an engine
                   connector reading the store itself, the router's kv.poolLoads)
  --engine-step-ms MS
                   what each engine iteration costs besides its tokens, however many prompts
                   it batches (default 0; docs/sim/README.md)
  --out FILE       also write the table there`;

export async function runSimGrid(args: string[]): Promise<number> {
  const parsed = parseCommandArgs(args, {
    quick: { type: "boolean" },
    seeds: { type: "string" },
    requests: { type: "string" },
    "candidate-hold": { type: "string" },
    candidate: { type: "string" },
    pool: { type: "string" },
    "engine-step-ms": { type: "string" },
    out: { type: "string" },
  }, USAGE);
  if (parsed.exit !== undefined) return parsed.exit;
  const { values } = parsed;
  const quick = values.quick === true;
  const seeds = (values.seeds ?? (quick ? "3" : "3,4,5")).split(",").map(Number);
  const requests = Number(values.requests ?? 2000);
  const candidate = values.candidate ?? "affinity_ttft";
  const hold = values["candidate-hold"] === undefined
    ? undefined
    : Number(values["candidate-hold"]);
  const stepText = values["engine-step-ms"];
  const stepMs = stepText === undefined || stepText.trim() === "" ? NaN : Number(stepText);
  const problems = [
    ...(seeds.every(Number.isInteger) ? [] : ["--seeds must be integers"]),
    ...(Number.isInteger(requests) && requests > 0
      ? []
      : ["--requests must be a positive integer"]),
    ...candidateProblems(candidate),
    ...(hold === undefined || /^\d+$/.test(values["candidate-hold"]!)
      ? []
      : ["--candidate-hold must be an integer ≥ 0"]),
    ...([undefined, "off", "planned", "always"].includes(values.pool)
      ? []
      : ["--pool must be off, planned or always"]),
    ...(stepText === undefined || (Number.isFinite(stepMs) && stepMs >= 0)
      ? []
      : ["--engine-step-ms must be a number ≥ 0"]),
  ];
  if (problems.length) {
    console.error(`${problems.join("\n")}\n\n${USAGE}`);
    return 2;
  }
  const policies = [...PEERS, ...OURS.filter((p) => p !== candidate), candidate];
  const trace = parseMooncakeTrace(await Deno.readTextFile(TRACE));
  const options = {
    cells: defaultGrid(quick, values.pool ? [values.pool as KvPoolMode] : undefined),
    seeds,
    policies,
    peers: PEERS,
    candidate,
    candidateHoldAboveTokens: hold,
    engineStepS: stepText === undefined ? 0 : stepMs / 1000,
    instances: 8,
    requests,
    trace,
  };
  const results = options.cells.map((cell) => {
    const result = runCell(cell, options);
    console.error(`${cell.name}: ${result.meanMet && result.p99Met ? "met" : "missed"}`);
    return result;
  });
  const met = results.filter((r) => r.meanMet && r.p99Met).length;
  const lines = [
    `Command: deno task sim:grid ${args.join(" ")}`.trimEnd(),
    "",
    `Mean TTFT in seconds (p99 in brackets), seeds ${seeds.join(", ")}, ${requests} requests ` +
    `per cell, 8 instances. ${candidate} met the targets in ${met} of ${results.length} cells.`,
    "",
    ...gridMarkdown(results, options),
  ];
  console.log(lines.join("\n"));
  if (values.out) await Deno.writeTextFile(values.out, lines.join("\n") + "\n");
  return 0;
}

/** Why `--candidate` cannot be run: bad syntax, an unknown policy, or a parameter it refuses. */
function candidateProblems(candidate: string): string[] {
  try {
    const { name, params } = parsePolicySpec(candidate);
    if (!isPolicyName(name)) return [`--candidate: unknown policy "${name}"`];
    createPolicy(name, params);
    return [];
  } catch (error) {
    return [`--candidate: ${(error as Error).message}`];
  }
}

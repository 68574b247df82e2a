/**
 * Seeded synthetic workloads in the shape of a Mooncake trace (trace.ts), for workloads nobody
 * tuned on: skewed documents (Zipf popularity), multi-turn conversations, agent loops over shared
 * system prompts, each optionally in bursts. The same spec and seed give the same trace.
 *
 * Block ids are prefix-chained as in the real trace: equal ids mean an equal prefix up to there.
 * A prompt's full blocks of shared content (a document, a system prompt, a session's history)
 * keep their ids from request to request; its own new text gets fresh ids.
 */
import { seededRandom } from "./rng.ts";
import type { TraceRequest } from "./trace.ts";

export const WORKLOAD_KINDS = ["docs", "chat", "agents"] as const;
export type WorkloadKind = typeof WORKLOAD_KINDS[number];

/** Arrivals: a Poisson process, its rate multiplied by `burstFactor` during each burst. */
export interface ArrivalSpec {
  requests: number;
  /** Mean arrivals per second outside bursts. */
  rps: number;
  /** Rate multiplier during a burst (1: no bursts). */
  burstFactor: number;
  /** A burst of `burstS` seconds starts every `burstEveryS` seconds. */
  burstEveryS: number;
  burstS: number;
}

export interface DocsSpec extends ArrivalSpec {
  kind: "docs";
  documents: number;
  documentTokens: number;
  /** Zipf exponent of document popularity (0: uniform). */
  zipf: number;
  questionTokens: number;
  outputTokens: number;
}

/** Sessions of several turns; `agents` is the same with shared system prompts and short gaps. */
export interface SessionSpec extends ArrivalSpec {
  kind: "chat" | "agents";
  /** System prompts shared by every session (0: none); a session draws one uniformly. */
  systemPrompts: number;
  systemTokens: number;
  turns: number;
  /** New tokens a turn adds (the user's message or the tool's output). */
  turnTokens: number;
  outputTokens: number;
  /** Mean seconds between a turn's arrival and the session's next (exponential). */
  gapS: number;
}

export type WorkloadSpec = DocsSpec | SessionSpec;

const ARRIVAL_DEFAULTS: ArrivalSpec = {
  requests: 2_000,
  rps: 2,
  burstFactor: 1,
  burstEveryS: 60,
  burstS: 10,
};

const DEFAULTS: Record<WorkloadKind, WorkloadSpec> = {
  docs: {
    ...ARRIVAL_DEFAULTS,
    kind: "docs",
    documents: 200,
    documentTokens: 20_000,
    zipf: 1,
    questionTokens: 100,
    outputTokens: 200,
  },
  chat: {
    ...ARRIVAL_DEFAULTS,
    kind: "chat",
    systemPrompts: 0,
    systemTokens: 0,
    turns: 6,
    turnTokens: 1_000,
    outputTokens: 300,
    gapS: 30,
  },
  agents: {
    ...ARRIVAL_DEFAULTS,
    kind: "agents",
    systemPrompts: 4,
    systemTokens: 8_000,
    turns: 10,
    turnTokens: 1_500,
    outputTokens: 150,
    gapS: 3,
  },
};

/**
 * A spec from its command-line form, `KIND[:key=value,...]` (e.g.
 * `docs:documents=200,zipf=1.2,rps=3`); unknown keys and bad values throw, naming the keys.
 */
export function parseWorkloadSpec(text: string): WorkloadSpec {
  const [kind, rest = ""] = text.split(":", 2);
  if (!(WORKLOAD_KINDS as readonly string[]).includes(kind)) {
    throw new Error(`Unknown workload "${kind}": use one of ${WORKLOAD_KINDS.join(", ")}.`);
  }
  const spec = { ...DEFAULTS[kind as WorkloadKind] } as unknown as Record<string, unknown>;
  for (const pair of rest.split(",").filter((p) => p !== "")) {
    const [key, value] = pair.split("=", 2);
    if (key === "kind" || !Object.hasOwn(spec, key)) {
      const keys = Object.keys(spec).filter((k) => k !== "kind").join(", ");
      throw new Error(`Workload ${kind} has no "${key}": its keys are ${keys}.`);
    }
    const number = Number(value);
    if (value === undefined || value === "" || !Number.isFinite(number) || number < 0) {
      throw new Error(`Workload ${kind}: ${key} must be a number >= 0, got "${value ?? ""}".`);
    }
    spec[key] = number;
  }
  const parsed = spec as unknown as WorkloadSpec;
  if (!(parsed.rps > 0) || !(parsed.requests >= 1) || !(parsed.burstFactor >= 1)) {
    throw new Error(`Workload ${kind}: rps must be > 0, requests >= 1 and burstFactor >= 1.`);
  }
  return parsed;
}

/** The workload's requests, by arrival time. */
export function generateWorkload(
  spec: WorkloadSpec,
  seed: number,
  blockTokens = 512,
): TraceRequest[] {
  const random = seededRandom(seed);
  const arrivals = arrivalTimesMs(spec, random);
  const ids = new BlockIds();
  return spec.kind === "docs"
    ? documentRequests(spec, arrivals, random, ids, blockTokens)
    : sessionRequests(spec, arrivals, random, ids, blockTokens);
}

/** Poisson arrivals, faster during bursts (thinning of the peak-rate process). */
function arrivalTimesMs(spec: ArrivalSpec, random: () => number): number[] {
  const peak = spec.rps * spec.burstFactor;
  const inBurst = (s: number) => spec.burstFactor > 1 && s % spec.burstEveryS < spec.burstS;
  const times: number[] = [];
  let s = 0;
  while (times.length < spec.requests) {
    s += -Math.log(1 - random()) / peak;
    if (inBurst(s) || random() < 1 / spec.burstFactor) times.push(Math.round(s * 1000));
  }
  return times;
}

/** Fresh block ids, and the stable ids of named shared content. */
class BlockIds {
  #next = 0;
  #shared = new Map<string, number[]>();

  fresh(count: number): number[] {
    return Array.from({ length: count }, () => this.#next++);
  }

  /** The ids of `name`'s first `count` full blocks (extended, never changed, as it grows). */
  shared(name: string, count: number): number[] {
    const ids = this.#shared.get(name) ?? [];
    if (ids.length < count) ids.push(...this.fresh(count - ids.length));
    this.#shared.set(name, ids);
    return ids.slice(0, count);
  }
}

function documentRequests(
  spec: DocsSpec,
  arrivals: number[],
  random: () => number,
  ids: BlockIds,
  blockTokens: number,
): TraceRequest[] {
  const pick = zipfSampler(spec.documents, spec.zipf, random);
  const docBlocks = Math.floor(spec.documentTokens / blockTokens);
  return arrivals.map((timestampMs) => {
    const doc = pick();
    const inputLength = spec.documentTokens + spec.questionTokens;
    const own = Math.ceil(inputLength / blockTokens) - docBlocks;
    return {
      timestampMs,
      inputLength,
      outputLength: spec.outputTokens,
      hashIds: [...ids.shared(`doc${doc}`, docBlocks), ...ids.fresh(own)],
    };
  });
}

/**
 * Sessions start at the arrival times; each runs its turns `gapS` apart (exponential), turn t's
 * prompt being the system prompt, the history so far and the turn's new tokens.
 */
function sessionRequests(
  spec: SessionSpec,
  arrivals: number[],
  random: () => number,
  ids: BlockIds,
  blockTokens: number,
): TraceRequest[] {
  const sessions = Math.ceil(spec.requests / Math.max(1, spec.turns));
  const requests: TraceRequest[] = [];
  for (let s = 0; s < sessions; s++) {
    const system = spec.systemPrompts > 0 ? Math.floor(random() * spec.systemPrompts) : -1;
    let at = arrivals[s];
    let history = 0;
    for (let t = 0; t < spec.turns; t++) {
      const inputLength = Math.max(
        1,
        spec.systemTokens * (system >= 0 ? 1 : 0) + history +
          spec.turnTokens,
      );
      requests.push({
        timestampMs: Math.round(at),
        inputLength,
        outputLength: spec.outputTokens,
        hashIds: sessionBlocks(ids, `session${s}`, system, spec, inputLength, blockTokens),
      });
      history += spec.turnTokens + spec.outputTokens;
      at += -Math.log(1 - random()) * spec.gapS * 1000;
    }
  }
  return requests
    .sort((a, b) => a.timestampMs - b.timestampMs)
    .slice(0, spec.requests);
}

/**
 * The system prompt's full blocks, then the session's: every full block of the prompt is text the
 * next turn's prompt repeats (the history grows at its end), so only a partial last block is new.
 */
function sessionBlocks(
  ids: BlockIds,
  session: string,
  system: number,
  spec: SessionSpec,
  inputLength: number,
  blockTokens: number,
): number[] {
  const systemBlocks = system >= 0 ? Math.floor(spec.systemTokens / blockTokens) : 0;
  const shared = system >= 0 ? ids.shared(`system${system}`, systemBlocks) : [];
  const full = Math.floor(inputLength / blockTokens);
  const own = ids.shared(session, full - systemBlocks);
  const partial = Math.ceil(inputLength / blockTokens) - full;
  return [...shared, ...own, ...ids.fresh(partial)];
}

/** Draws 0..n-1 with probability ∝ 1/(k+1)^s. */
export function zipfSampler(n: number, s: number, random: () => number): () => number {
  const cdf: number[] = [];
  let total = 0;
  for (let k = 0; k < n; k++) cdf.push(total += 1 / Math.pow(k + 1, s));
  return () => {
    const u = random() * total;
    let lo = 0, hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid] < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

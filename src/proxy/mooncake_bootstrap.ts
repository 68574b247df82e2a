import { type DpRank, dpRanksOf } from "./pd_protocol.ts";

/** Requests waiting and running per data-parallel rank of the engine at a URL, when it says. */
export type ReadRankLoads = (engineUrl: string) => Promise<Map<number, number> | undefined>;

/** How long an engine's per-rank load report is used before it is read again. */
const LOAD_TTL_MS = 1_000;

/**
 * How old a `/query` answer may be before the next use asks again (and keeps using it meanwhile):
 * a streamed decode that fails on a restarted prefill's old ids has already begun its answer and
 * is not retried, so nothing else would notice them.
 */
const QUERY_TTL_MS = 10_000;

interface Known {
  answer: Promise<DpRank[] | undefined>;
  askedAt: number;
}

/**
 * The data-parallel ranks behind each vLLM MooncakeConnector bootstrap server (`GET /query`,
 * docs/compat.md §7), remembered until `forget` (a restarted prefill has new engine ids) and asked
 * again in the background every QUERY_TTL_MS; a failed or empty answer is asked again next time.
 * The next prefill goes to the rank its engine reports least loaded, else to the ranks in turn
 * (the upstream proxy's cycle).
 */
export class BootstrapEngineIds {
  readonly #known = new Map<string, Known>();
  readonly #loads = new Map<string, RankLoads>();
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #readLoads: ReadRankLoads;

  constructor(
    options: {
      fetch: typeof fetch;
      timeoutMs: number;
      now?: () => number;
      /** The engines' per-rank load (src/cluster/rank_loads.ts); absent: ranks take turns. */
      readLoads?: ReadRankLoads;
    },
  ) {
    this.#fetch = options.fetch;
    this.#timeoutMs = options.timeoutMs;
    this.#now = options.now ?? (() => performance.now());
    this.#readLoads = options.readLoads ?? (() => Promise.resolve(undefined));
  }

  /** Every data-parallel rank at `http://host:port/query`, or undefined. */
  ranks(host: string, port: number): Promise<DpRank[] | undefined> {
    const url = bootstrapUrl(host, port);
    const known = this.#known.get(url);
    if (!known) return this.#askNow(url);
    if (this.#now() - known.askedAt >= QUERY_TTL_MS) this.#askNow(url); // for the next uses
    return known.answer;
  }

  /** Drops what `http://host:port/query` answered: the next use asks again. */
  forget(host: string, port: number): void {
    this.#known.delete(bootstrapUrl(host, port));
  }

  /** The rank for the next prefill on the engine at `engineUrl` (bootstrap server host:port). */
  async pick(engineUrl: string, host: string, port: number): Promise<DpRank | undefined> {
    const ranks = await this.ranks(host, port);
    if (!ranks) return undefined;
    let loads = this.#loads.get(engineUrl);
    if (!loads) {
      loads = new RankLoads(() => this.#readLoads(engineUrl), this.#now);
      this.#loads.set(engineUrl, loads);
    }
    return loads.pick(ranks);
  }

  /** Asks `/query` and remembers the answer, unless it failed. */
  #askNow(url: string): Promise<DpRank[] | undefined> {
    const known: Known = { answer: this.#ask(url), askedAt: this.#now() };
    this.#known.set(url, known);
    known.answer.then((ranks) => {
      if (ranks === undefined && this.#known.get(url) === known) this.#known.delete(url);
    });
    return known.answer;
  }

  async #ask(url: string): Promise<DpRank[] | undefined> {
    try {
      const response = await this.#fetch(`${url}/query`, {
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      if (!response.ok) {
        await response.body?.cancel();
        return undefined;
      }
      return dpRanksOf(await response.json());
    } catch {
      return undefined;
    }
  }
}

function bootstrapUrl(host: string, port: number): string {
  return `http://${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}:${port}`;
}

/**
 * One engine's load per rank: its last report plus the prefills pinned since, so that the picks
 * between two reports do not all land on the same rank.
 */
class RankLoads {
  #reported?: Map<number, number>;
  readonly #pinned = new Map<number, number>();
  #readAt?: number;
  #reading?: Promise<void>;
  #turn = 0;

  constructor(
    readonly read: () => Promise<Map<number, number> | undefined>,
    readonly now: () => number,
  ) {}

  async pick(ranks: DpRank[]): Promise<DpRank> {
    const reading = this.#refresh();
    if (this.#readAt === undefined) await reading; // the first pick waits for a report
    const chosen = this.#least(ranks);
    this.#pinned.set(chosen.rank, (this.#pinned.get(chosen.rank) ?? 0) + 1);
    return chosen;
  }

  /** The least loaded rank; ties, and engines without a report for every rank, in turn. */
  #least(ranks: DpRank[]): DpRank {
    const start = this.#turn++ % ranks.length;
    const inTurn = [...ranks.slice(start), ...ranks.slice(0, start)];
    const reported = this.#reported;
    if (!reported || !ranks.every((r) => reported.has(r.rank))) return inTurn[0];
    const load = (r: DpRank) => reported.get(r.rank)! + (this.#pinned.get(r.rank) ?? 0);
    return inTurn.reduce((best, r) => (load(r) < load(best) ? r : best));
  }

  /** Reads the engine's report again once the last is older than LOAD_TTL_MS. */
  #refresh(): Promise<void> {
    if (this.#reading) return this.#reading;
    const fresh = this.#readAt !== undefined && this.now() - this.#readAt < LOAD_TTL_MS;
    if (fresh) return Promise.resolve();
    const pinnedBefore = new Map(this.#pinned);
    this.#reading = this.read().then((reported) => {
      this.#reported = reported;
      this.#readAt = this.now();
      // The report counts the prefills pinned before it was asked for; later ones stay counted.
      for (const [rank, n] of pinnedBefore) this.#pinned.set(rank, this.#pinned.get(rank)! - n);
    }).finally(() => (this.#reading = undefined));
    return this.#reading;
  }
}

/**
 * The flow-control queue of one model: requests admission would refuse wait here instead, in
 * priority bands (a lower `priority` first, as vLLM orders its own queue), fair between tenants
 * inside a band by their weights (start-time fair queueing over prompt tokens), earliest deadline
 * first inside a tenant. Bounded in requests and prompt tokens. Pure: times are passed in, the
 * caller owns timers, re-planning and answers (src/gateway/flow_control.ts).
 */
export interface FlowQueueLimits {
  maxRequests: number;
  maxPromptTokens: number;
}

export interface FlowEntry<T> {
  readonly item: T;
  readonly priority: number;
  /** `""` when the router has no tenants. */
  readonly tenant: string;
  readonly weight: number;
  readonly promptTokens: number;
  /** Monotonic ms at which the entry expires. */
  readonly deadline: number;
  readonly enqueuedAt: number;
}

/** `displaced`: less urgent entries taken out to make room (their wait ends as a full queue's). */
export type EnqueueVerdict<T> =
  | { queued: true; displaced: FlowEntry<T>[] }
  | { queued: false; limit: "requests" | "prompt_tokens" };

interface TenantLane<T> {
  /** The band's virtual time this tenant's next request starts at (fair-queueing tag). */
  virtualStart: number;
  entries: FlowEntry<T>[];
}

interface Band<T> {
  /** The band's virtual clock: the start tag of the last request taken from it. */
  virtualNow: number;
  lanes: Map<string, TenantLane<T>>;
}

export class FlowQueue<T> {
  readonly #bands = new Map<number, Band<T>>();
  #size = 0;
  #promptTokens = 0;

  constructor(public limits: FlowQueueLimits) {}

  get size(): number {
    return this.#size;
  }

  get promptTokens(): number {
    return this.#promptTokens;
  }

  /**
   * Adds an entry unless it would pass a bound; past one, less urgent entries (least urgent band,
   * latest deadline first) make room for it, so a full queue of batch work never refuses an
   * interactive request. A prompt larger than the token bound never fits.
   */
  push(entry: FlowEntry<T>): EnqueueVerdict<T> {
    const overflow = this.#overflow(entry, 0, 0);
    const displaced = overflow ? this.#displaceable(entry) : [];
    if (displaced === undefined) return { queued: false, limit: overflow! };
    for (const out of displaced) this.remove(out);
    const band = this.#band(entry.priority);
    let lane = band.lanes.get(entry.tenant);
    if (!lane) {
      lane = { virtualStart: band.virtualNow, entries: [] };
      band.lanes.set(entry.tenant, lane);
    }
    // A tenant that was idle starts at the band's clock: no credit banked while away.
    if (lane.entries.length === 0) lane.virtualStart = Math.max(lane.virtualStart, band.virtualNow);
    insertByDeadline(lane.entries, entry);
    this.#size++;
    this.#promptTokens += entry.promptTokens;
    return { queued: true, displaced };
  }

  /** Which bound `entry` would pass with `freedRequests` and `freedTokens` taken out first. */
  #overflow(
    entry: FlowEntry<T>,
    freedRequests: number,
    freedTokens: number,
  ): "requests" | "prompt_tokens" | undefined {
    if (this.#size - freedRequests + 1 > this.limits.maxRequests) return "requests";
    const tokens = this.#promptTokens - freedTokens + entry.promptTokens;
    return tokens > this.limits.maxPromptTokens ? "prompt_tokens" : undefined;
  }

  /** The least urgent entries whose leaving makes room for `entry`; undefined if none can. */
  #displaceable(entry: FlowEntry<T>): FlowEntry<T>[] | undefined {
    const lessUrgent = this.entries().filter((e) => e.priority > entry.priority)
      .sort((a, b) => b.priority - a.priority || b.deadline - a.deadline);
    const out: FlowEntry<T>[] = [];
    let tokens = 0;
    for (const candidate of lessUrgent) {
      out.push(candidate);
      tokens += candidate.promptTokens;
      if (!this.#overflow(entry, out.length, tokens)) return out;
    }
    return undefined;
  }

  /**
   * The entry that goes next: most urgent band, fairest tenant, earliest deadline; passing over
   * those in `except` (already tried in this pass).
   */
  peek(except?: ReadonlySet<FlowEntry<T>>): FlowEntry<T> | undefined {
    const priorities = [...this.#bands.keys()].sort((a, b) => a - b);
    for (const priority of priorities) {
      const next = this.#nextIn(this.#bands.get(priority)!, except);
      if (next) return next;
    }
    return undefined;
  }

  /** The band's next entry: its fairest lane's earliest, lanes ordered by virtual time. */
  #nextIn(band: Band<T>, except?: ReadonlySet<FlowEntry<T>>): FlowEntry<T> | undefined {
    const lanes = [...band.lanes.values()].filter((lane) => lane.entries.length > 0);
    lanes.sort((a, b) => a.virtualStart - b.virtualStart);
    for (const lane of lanes) {
      const entry = except ? lane.entries.find((e) => !except.has(e)) : lane.entries[0];
      if (entry) return entry;
    }
    return undefined;
  }

  /** Takes `entry` out as served: its tenant's virtual time advances by its weighted cost. */
  take(entry: FlowEntry<T>): boolean {
    const band = this.#bands.get(entry.priority);
    const lane = band?.lanes.get(entry.tenant);
    if (!band || !lane || !this.#remove(lane, entry)) return false;
    band.virtualNow = Math.max(band.virtualNow, lane.virtualStart);
    lane.virtualStart += Math.max(1, entry.promptTokens) / entry.weight;
    this.#dropEmpty(entry.priority);
    return true;
  }

  /** Takes `entry` out unserved (expired, aborted, flushed): no charge to its tenant. */
  remove(entry: FlowEntry<T>): boolean {
    const band = this.#bands.get(entry.priority);
    const lane = band?.lanes.get(entry.tenant);
    if (!band || !lane || !this.#remove(lane, entry)) return false;
    this.#dropEmpty(entry.priority);
    return true;
  }

  /** Whether `entry` still waits here. */
  has(entry: FlowEntry<T>): boolean {
    return this.#bands.get(entry.priority)?.lanes.get(entry.tenant)?.entries.includes(entry) ??
      false;
  }

  /** Every entry whose deadline is at or before `now`, in no particular order. */
  expired(now: number): FlowEntry<T>[] {
    return this.entries().filter((entry) => entry.deadline <= now);
  }

  /** The earliest deadline waiting, for the caller's one timer. */
  nextDeadline(): number | undefined {
    let next: number | undefined;
    for (const entry of this.entries()) {
      if (next === undefined || entry.deadline < next) next = entry.deadline;
    }
    return next;
  }

  entries(): FlowEntry<T>[] {
    const all: FlowEntry<T>[] = [];
    for (const band of this.#bands.values()) {
      for (const lane of band.lanes.values()) all.push(...lane.entries);
    }
    return all;
  }

  /** Waiting requests per priority band. */
  lengths(): Map<number, number> {
    const lengths = new Map<number, number>();
    for (const [priority, band] of this.#bands) {
      let count = 0;
      for (const lane of band.lanes.values()) count += lane.entries.length;
      lengths.set(priority, count);
    }
    return lengths;
  }

  #band(priority: number): Band<T> {
    let band = this.#bands.get(priority);
    if (!band) {
      band = { virtualNow: 0, lanes: new Map() };
      this.#bands.set(priority, band);
    }
    return band;
  }

  #remove(lane: TenantLane<T>, entry: FlowEntry<T>): boolean {
    const at = lane.entries.indexOf(entry);
    if (at < 0) return false;
    lane.entries.splice(at, 1);
    this.#size--;
    this.#promptTokens -= entry.promptTokens;
    return true;
  }

  /** A band with nobody waiting is forgotten, its tenants' virtual times with it. */
  #dropEmpty(priority: number): void {
    const band = this.#bands.get(priority);
    if (band && [...band.lanes.values()].every((lane) => lane.entries.length === 0)) {
      this.#bands.delete(priority);
    }
  }
}

function insertByDeadline<T>(entries: FlowEntry<T>[], entry: FlowEntry<T>): void {
  let at = entries.length;
  while (at > 0 && entries[at - 1].deadline > entry.deadline) at--;
  entries.splice(at, 0, entry);
}

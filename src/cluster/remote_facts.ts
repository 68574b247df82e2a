/**
 * Other replicas' dispatches, applied to this replica's view: their leases as silent leases in
 * the model's load account, their predicted keys in its predicted index, the homes of the
 * Responses API responses they relayed in its response homes (heard live only: snapshots do not
 * list them). Each replica's snapshot
 * (its live leases, by id range) repairs what was lost: leases it no longer holds are released
 * (an end sent while Redis was down), leases never heard of are taken. A replica not heard from
 * (facts or snapshot) for `silentAfterMs` is taken as gone and its leases are released.
 */
import type { LoadAccount, LoadLease } from "./load_account.ts";
import type { FactBatch, LiveLease, LiveRange } from "./shared_facts.ts";

/** Where a model's facts go: its load account and (when enabled) its predicted index. */
export interface ModelView {
  account: LoadAccount;
  /** Which instance stored which Responses API response (one memory for every model). */
  homes?: {
    remember(
      responseId: string,
      home: { model: string; instanceId: string },
      now: number,
      options: { silent: boolean },
    ): void;
  };
  predicted?: {
    record(
      keys: readonly string[],
      writer: { instanceId: string; kvHost?: string },
      options: { silent: boolean },
    ): void;
  };
}

interface RemoteLease {
  /** The lease id as a number, to place it in a snapshot's range. */
  seq: number;
  lease: LoadLease;
}

interface Replica {
  lastHeard: number;
  leases: Map<string, RemoteLease>;
}

/** What snapshots and silence have repaired so far. */
export interface RepairCounts {
  /** Remote leases released because their replica's snapshot no longer lists them. */
  lostEnds: number;
  /** Remote leases taken from a snapshot because their lease fact never arrived. */
  lostLeases: number;
  /** Replicas gone silent, whose leases were all released. */
  silentReplicas: number;
}

export class RemoteFacts {
  readonly #replicas = new Map<string, Replica>();
  readonly #viewOf: (model: string) => ModelView | undefined;
  readonly #now: () => number;
  readonly #silentAfterMs: number;
  readonly #log: (message: string, fields?: Record<string, unknown>) => void;
  readonly repairs: RepairCounts = { lostEnds: 0, lostLeases: 0, silentReplicas: 0 };

  constructor(options: {
    viewOf: (model: string) => ModelView | undefined;
    now: () => number;
    silentAfterMs?: number;
    log?: (message: string, fields?: Record<string, unknown>) => void;
  }) {
    this.#viewOf = options.viewOf;
    this.#now = options.now;
    this.#silentAfterMs = options.silentAfterMs ?? 15_000;
    this.#log = options.log ?? (() => {});
  }

  /** Leases held for other replicas now. */
  get remoteLeases(): number {
    let count = 0;
    for (const replica of this.#replicas.values()) count += replica.leases.size;
    return count;
  }

  apply(batch: FactBatch): void {
    let replica = this.#replicas.get(batch.replica);
    if (!replica) this.#replicas.set(batch.replica, replica = { lastHeard: 0, leases: new Map() });
    replica.lastHeard = this.#now();
    for (const fact of batch.facts) {
      const view = this.#viewOf(fact.model);
      if (!view) continue; // a model this replica does not serve (yet)
      const key = leaseKey(fact.model, "id" in fact ? fact.id : "");
      if (fact.k === "lease" && !replica.leases.has(key)) {
        const lease = view.account.lease(fact.instance, fact.tokens, {
          silent: true,
          sequences: fact.seqs,
        });
        replica.leases.set(key, { seq: Number(fact.id), lease });
      } else if (fact.k === "first") replica.leases.get(key)?.lease.firstToken();
      else if (fact.k === "end") {
        replica.leases.get(key)?.lease.release();
        replica.leases.delete(key);
      } else if (fact.k === "home") {
        const home = { model: fact.model, instanceId: fact.instance };
        view.homes?.remember(fact.id, home, this.#now(), { silent: true });
      } else if (fact.k === "keys") {
        const writer = { instanceId: fact.instance, kvHost: fact.kvHost };
        view.predicted?.record(fact.keys, writer, { silent: true });
      }
    }
    if (batch.live) this.#repair(batch.replica, replica, batch.live);
  }

  /** Releases the leases of replicas gone silent; returns how many replicas were dropped. */
  sweep(): number {
    const cutoff = this.#now() - this.#silentAfterMs;
    let dropped = 0;
    for (const [name, replica] of this.#replicas) {
      if (replica.lastHeard > cutoff) continue;
      for (const { lease } of replica.leases.values()) lease.release();
      this.#replicas.delete(name);
      dropped++;
      this.#log("shared state: a replica went silent; its leases are released", {
        level: "warn",
        replica: name,
        leases: replica.leases.size,
        silentAfterMs: this.#silentAfterMs,
      });
    }
    this.repairs.silentReplicas += dropped;
    return dropped;
  }

  /** Makes `replica`'s leases in `range` exactly the ones its snapshot lists. */
  #repair(name: string, replica: Replica, range: LiveRange): void {
    const listed = new Set(range.leases.map((live) => leaseKey(live.model, live.id)));
    let ended = 0;
    for (const [key, { seq, lease }] of replica.leases) {
      const inRange = seq >= range.from && seq < range.to;
      if (!inRange || listed.has(key)) continue;
      lease.release();
      replica.leases.delete(key);
      ended++;
    }
    let taken = 0;
    for (const live of range.leases) taken += this.#takeListed(replica, live) ? 1 : 0;
    this.repairs.lostEnds += ended;
    this.repairs.lostLeases += taken;
    if (ended + taken === 0) return;
    this.#log("shared state: caught up with a replica's snapshot", {
      replica: name,
      released: ended,
      taken,
    });
  }

  /** Takes (or moves to decoding) a listed lease; true when it was missing. */
  #takeListed(replica: Replica, live: LiveLease): boolean {
    const view = this.#viewOf(live.model);
    if (!view) return false;
    const key = leaseKey(live.model, live.id);
    let remote = replica.leases.get(key);
    const missing = remote === undefined;
    if (!remote) {
      const lease = view.account.lease(live.instance, live.tokens, {
        silent: true,
        sequences: live.seqs,
      });
      replica.leases.set(key, remote = { seq: Number(live.id), lease });
    }
    if (live.decoding) remote.lease.firstToken();
    return missing;
  }
}

function leaseKey(model: string, id: string): string {
  return `${model}\u0000${id}`;
}

/**
 * Other replicas' dispatches, applied to this replica's view: their leases as silent leases in
 * the model's load account, their predicted keys in its predicted index. A replica not heard from
 * (facts or heartbeat) for `silentAfterMs` is taken as gone and its leases are released.
 */
import type { LoadAccount, LoadLease } from "./load_account.ts";
import type { FactBatch } from "./shared_facts.ts";

/** Where a model's facts go: its load account and (when enabled) its predicted index. */
export interface ModelView {
  account: LoadAccount;
  predicted?: {
    record(
      keys: readonly string[],
      writer: { instanceId: string; kvHost?: string },
      options: { silent: boolean },
    ): void;
  };
}

interface Replica {
  lastHeard: number;
  leases: Map<string, LoadLease>;
}

export class RemoteFacts {
  readonly #replicas = new Map<string, Replica>();
  readonly #viewOf: (model: string) => ModelView | undefined;
  readonly #now: () => number;
  readonly #silentAfterMs: number;

  constructor(options: {
    viewOf: (model: string) => ModelView | undefined;
    now: () => number;
    silentAfterMs?: number;
  }) {
    this.#viewOf = options.viewOf;
    this.#now = options.now;
    this.#silentAfterMs = options.silentAfterMs ?? 15_000;
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
      const key = `${fact.model}\u0000${"id" in fact ? fact.id : ""}`;
      if (fact.k === "lease" && !replica.leases.has(key)) {
        replica.leases.set(key, view.account.lease(fact.instance, fact.tokens, { silent: true }));
      } else if (fact.k === "first") replica.leases.get(key)?.firstToken();
      else if (fact.k === "end") {
        replica.leases.get(key)?.release();
        replica.leases.delete(key);
      } else if (fact.k === "keys") {
        const writer = { instanceId: fact.instance, kvHost: fact.kvHost };
        view.predicted?.record(fact.keys, writer, { silent: true });
      }
    }
  }

  /** Releases the leases of replicas gone silent; returns how many replicas were dropped. */
  sweep(): number {
    const cutoff = this.#now() - this.#silentAfterMs;
    let dropped = 0;
    for (const [name, replica] of this.#replicas) {
      if (replica.lastHeard > cutoff) continue;
      for (const lease of replica.leases.values()) lease.release();
      this.#replicas.delete(name);
      dropped++;
    }
    return dropped;
  }
}

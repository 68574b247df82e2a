/** Where one store key's bytes live, read from a `/batch_query_keys` entry (docs/compat.md §4). */
export interface KeyLocation {
  /** The key exists and at least one replica can be read. */
  present: boolean;
  /** Hosts (without port; IPv6 without brackets) of the memory replicas' transport endpoints. */
  memoryHosts: string[];
  /** Hosts of clients holding the key on local SSD (`local_disk_values[].transport_endpoint`). */
  localDiskHosts: string[];
  /** A copy exists on the shared file system (`disk_values`). */
  sharedDisk: boolean;
  /** The store's error code for this key, e.g. OBJECT_NOT_FOUND or REPLICA_IS_NOT_READY. */
  error?: string;
  /** The router's own recent dispatches added to (or made up) this answer. */
  predicted?: boolean;
  /**
   * Only predicted: an engine is still computing and writing it, so nobody can read it from the
   * pool yet. It counts for its writer's local prefix, never for the pool prefix.
   */
  pendingWrite?: boolean;
}

export type LookupOutcome =
  /** Every batch answered. */
  | "ok"
  /** Answered by the mirror of the master's KV events, without asking the master. */
  | "mirror"
  /** Skipped: the store is inside its down-window (load-only dispatch). */
  | "store_down"
  /** Skipped: prompt below `minPromptTokens` or nothing to look up. */
  | "skipped"
  /** The deadline passed before every batch answered; what did answer is kept. */
  | "deadline"
  /** Every attempt failed (HTTP error, 503 standby, garbage, refused). */
  | "failed";

export interface LookupResult {
  outcome: LookupOutcome;
  /** Answers per key; a key missing here was not answered (treat as absent). */
  locations: Map<string, KeyLocation>;
  keysQueried: number;
  batches: number;
  attempts: number;
  elapsedMs: number;
  error?: string;
  /** Keys present only because the router's own recent dispatches vouch for them. */
  predictedKeys?: number;
}

/** Anything that can say where keys live: the Mooncake client, the local predicted index, both. */
export interface KvIndex {
  lookup(
    keys: string[],
    options?: { deadlineMs?: number; signal?: AbortSignal },
  ): Promise<LookupResult>;
}

/** Prefixes of one prompt in the pool and on each instance, in chunks from chunk 0. */
export interface PrefixHits {
  /** Consecutive chunks from 0 present anywhere in the pool. */
  poolChunks: number;
  /** Per instance id: consecutive chunks from 0 with a replica on that instance's KV host. */
  localChunks: Map<string, number>;
}

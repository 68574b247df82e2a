/**
 * The in-process meeting point of the P/D fakes: what the real engines learn over NIXL, the
 * Mooncake transfer engine or SGLang's bootstrap server, the fakes learn here.
 *
 * A prefill publishes its finished KV under the key its protocol pairs on (docs/compat.md §7):
 *
 * - vLLM NIXL: `remote_engine_id` + `remote_request_id` of the prefill's answer (the decode must
 *   also send back the answer's host, port, block ids and tp_size unchanged);
 * - vLLM Mooncake: the prefill's bootstrap address + `transfer_id` (the decode's engine id must
 *   be that of the DP rank the prefill ran on);
 * - SGLang: the prefill's bootstrap `host:port` + `bootstrap_room`.
 *
 * A decode claims the key: at once (NIXL, serial) or waiting up to a timeout for the prefill to
 * publish (Mooncake, SGLang: concurrent). A key is claimed by one decode only and is consumed by a
 * successful claim; an unclaimed publication lapses after its lease. SGLang's prefill also waits
 * for its decode (`published.decode`), as the real one waits for the decode's KV indices.
 */

export type PdFailure =
  | "no_prefill"
  | "timeout"
  | "mismatch"
  | "prefill_dead"
  | "duplicate"
  | "unknown_bootstrap"
  | "no_decode";

/** A failed KV hand-over; the engine turns it into the real engine's error. */
export class PdTransferError extends Error {
  constructor(readonly failure: PdFailure, message: string) {
    super(message);
    this.name = "PdTransferError";
  }
}

/** The prefill half of one request, as published. */
export interface PdPrefillSide {
  instanceId: string;
  /** The fake engine's request sequence number (its `stats.requests[].seq`). */
  seq: number;
  requestId?: string;
  promptTokens: number;
  /** The prefill's own prefix-cache hits (an SGLang decode reports them as its own). */
  cachedTokens?: number;
  /** vLLM NIXL: the `kv_transfer_params` the prefill answered. */
  answered?: Record<string, unknown>;
  /** vLLM Mooncake: the engine id and data-parallel rank the prefill ran on. */
  engineId?: string;
  dpRank?: number;
  /** false once the prefill's process is gone (closed, refusing, hung). */
  alive(): boolean;
}

/** The decode half of one request, as claimed. */
export interface PdDecodeSide {
  instanceId: string;
  seq: number;
  requestId?: string;
  promptTokens: number;
}

/** A bootstrap server (vLLM Mooncake, SGLang) a decode can reach by address. */
export interface PdBootstrapServer {
  /** `http://host:port` (Mooncake) or `host:port` (SGLang), normalized. */
  addr: string;
  instanceId: string;
  /** Engine ids by data-parallel rank (vLLM Mooncake's `/query`). */
  engineIds: string[];
  alive(): boolean;
}

export interface ClaimOptions {
  /** Wall ms to wait for the prefill (0: it must already be there). */
  timeoutMs: number;
  signal?: AbortSignal;
  /** Checked while waiting; `maxFailures` consecutive false answers fail the claim. */
  heartbeat?: { alive(): boolean; intervalMs: number; maxFailures: number };
  /** A mismatch message, or undefined when the published prefill fits this decode. */
  verify?: (prefill: PdPrefillSide) => string | undefined;
}

export interface PdPublication {
  /** Resolves when a decode claimed the key; rejects after `timeoutMs` (no_decode). */
  decode(timeoutMs: number, signal?: AbortSignal): Promise<PdDecodeSide>;
}

export interface PdSlotView {
  key: string;
  prefill?: { instanceId: string; seq: number; requestId?: string };
  decode?: { instanceId: string; seq: number; requestId?: string };
  expired: boolean;
}

interface Slot {
  key: string;
  prefill?: PdPrefillSide;
  decode?: PdDecodeSide;
  /** performance.now() after which an unclaimed prefill has freed its KV. */
  leaseEnd: number;
  onPrefill: Set<() => void>;
  onDecode: Set<() => void>;
}

class Aborted extends Error {
  constructor() {
    super("aborted");
    this.name = "AbortError";
  }
}

export class PdRegistry {
  #slots = new Map<string, Slot>();
  #bootstrap = new Map<string, PdBootstrapServer>();

  /** Makes a bootstrap server reachable by its address; returns its removal. */
  registerBootstrap(server: PdBootstrapServer): () => void {
    this.#bootstrap.set(server.addr, server);
    return () => {
      if (this.#bootstrap.get(server.addr) === server) this.#bootstrap.delete(server.addr);
    };
  }

  /** The live bootstrap server at `addr`, if any. */
  bootstrap(addr: string): PdBootstrapServer | undefined {
    const server = this.#bootstrap.get(addr);
    return server?.alive() ? server : undefined;
  }

  /**
   * The prefill's KV for `key` is ready and held for `leaseMs`. A key already published and not
   * consumed fails with `duplicate` (one room / transfer id is one request).
   */
  publish(key: string, prefill: PdPrefillSide, leaseMs: number): PdPublication {
    this.#sweep();
    const slot = this.#slot(key);
    if (slot.prefill) {
      throw new PdTransferError(
        "duplicate",
        `${key} was already published by ${slot.prefill.instanceId} request ${slot.prefill.seq}`,
      );
    }
    slot.prefill = prefill;
    slot.leaseEnd = performance.now() + leaseMs;
    for (const wake of [...slot.onPrefill]) wake();
    return {
      decode: (timeoutMs, signal) =>
        this.#wait(slot, "onDecode", () => slot.decode, timeoutMs, signal).then((decode) => {
          if (decode) return decode;
          throw new PdTransferError("no_decode", `no decode claimed ${key} in ${timeoutMs} ms`);
        }),
    };
  }

  /** Takes the prefill published under `key`, waiting up to `options.timeoutMs`. */
  async claim(key: string, decode: PdDecodeSide, options: ClaimOptions): Promise<PdPrefillSide> {
    const lapsed = this.#slots.get(key);
    if (lapsed?.prefill && !lapsed.decode && performance.now() > lapsed.leaseEnd) {
      this.#slots.delete(key);
      throw new PdTransferError("no_prefill", `the prefill's lease on ${key} lapsed`);
    }
    this.#sweep();
    const slot = this.#slot(key);
    if (slot.decode) {
      throw new PdTransferError(
        "duplicate",
        `${key} is already claimed by ${slot.decode.instanceId} request ${slot.decode.seq}`,
      );
    }
    slot.decode = decode;
    for (const wake of [...slot.onDecode]) wake();
    let ok = false;
    try {
      const prefill = await this.#wait(
        slot,
        "onPrefill",
        () => slot.prefill,
        options.timeoutMs,
        options.signal,
        options.heartbeat,
      );
      if (!prefill) {
        throw new PdTransferError(
          options.timeoutMs > 0 ? "timeout" : "no_prefill",
          options.timeoutMs > 0
            ? `no prefill published ${key} within ${options.timeoutMs} ms`
            : `no prefill holds ${key}`,
        );
      }
      if (performance.now() > slot.leaseEnd) {
        throw new PdTransferError("no_prefill", `the prefill's lease on ${key} lapsed`);
      }
      if (!prefill.alive()) {
        throw new PdTransferError(
          "prefill_dead",
          `prefill ${prefill.instanceId} holding ${key} is gone`,
        );
      }
      const mismatch = options.verify?.(prefill);
      if (mismatch) throw new PdTransferError("mismatch", mismatch);
      ok = true;
      return prefill;
    } finally {
      if (ok) {
        this.#slots.delete(key); // consumed
      } else if (slot.decode === decode) {
        slot.decode = undefined; // another decode may still claim it
        if (!slot.prefill || performance.now() > slot.leaseEnd) this.#slots.delete(key);
      }
    }
  }

  /** Every key the registry holds, for tests. */
  slots(): PdSlotView[] {
    const now = performance.now();
    const side = (s?: { instanceId: string; seq: number; requestId?: string }) =>
      s && { instanceId: s.instanceId, seq: s.seq, requestId: s.requestId };
    return [...this.#slots.values()].map((slot) => ({
      key: slot.key,
      prefill: side(slot.prefill),
      decode: side(slot.decode),
      expired: slot.prefill !== undefined && now > slot.leaseEnd,
    }));
  }

  /** Forgets every publication and claim (waiters time out). */
  clear(): void {
    this.#slots.clear();
  }

  #slot(key: string): Slot {
    let slot = this.#slots.get(key);
    if (!slot) {
      slot = { key, leaseEnd: Infinity, onPrefill: new Set(), onDecode: new Set() };
      this.#slots.set(key, slot);
    }
    return slot;
  }

  /** Drops lapsed publications nobody waits on. */
  #sweep(): void {
    const now = performance.now();
    for (const [key, slot] of this.#slots) {
      if (slot.prefill && !slot.decode && slot.onDecode.size === 0 && now > slot.leaseEnd) {
        this.#slots.delete(key);
      }
    }
  }

  /** Resolves with `get()` once defined, or undefined after `timeoutMs`. */
  #wait<T>(
    slot: Slot,
    wakers: "onPrefill" | "onDecode",
    get: () => T | undefined,
    timeoutMs: number,
    signal?: AbortSignal,
    heartbeat?: ClaimOptions["heartbeat"],
  ): Promise<T | undefined> {
    const now = get();
    if (now !== undefined || timeoutMs <= 0) return Promise.resolve(now);
    if (signal?.aborted) return Promise.reject(new Aborted());
    return new Promise<T | undefined>((resolve, reject) => {
      let beat: ReturnType<typeof setInterval> | undefined;
      const done = () => {
        clearTimeout(timer);
        if (beat !== undefined) clearInterval(beat);
        slot[wakers].delete(wake);
        signal?.removeEventListener("abort", onAbort);
      };
      const wake = () => {
        const value = get();
        if (value === undefined) return;
        done();
        resolve(value);
      };
      const onAbort = () => {
        done();
        reject(new Aborted());
      };
      const timer = setTimeout(() => {
        done();
        resolve(undefined);
      }, timeoutMs);
      if (heartbeat) {
        let misses = 0;
        beat = setInterval(() => {
          misses = heartbeat.alive() ? 0 : misses + 1;
          if (misses < heartbeat.maxFailures) return;
          done();
          reject(
            new PdTransferError(
              "prefill_dead",
              `lost the prefill's bootstrap server while waiting for ${slot.key}`,
            ),
          );
        }, heartbeat.intervalMs);
      }
      slot[wakers].add(wake);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

/** The registry every fake engine uses unless given its own. */
export const defaultPdRegistry = new PdRegistry();

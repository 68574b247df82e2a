/**
 * Workers (request_worker.ts) for the request path's long CPU-only steps: parsing a large body
 * and hashing a long prompt's store keys, so that no client input holds the main loop. Every job
 * has a deadline; a worker that misses it or crashes is replaced and its jobs fail, and the caller
 * then does the work itself (parse) or goes without it (hash: dispatch by load).
 */
import type { ExtraKeys, HashedPrompt, KeySchemeOptions } from "../hashing/types.ts";
import type { JsonEndpoint } from "../openai/endpoints.ts";
import type {
  FromRequestWorker,
  RequestJob,
  RequestJobResult,
  ToRequestWorker,
} from "./request_worker_protocol.ts";

/** A job that failed; a parse job's body is handed back when the worker could return it. */
export class RequestWorkerError extends Error {
  constructor(message: string, readonly bytes?: Uint8Array<ArrayBuffer>) {
    super(message);
    this.name = "RequestWorkerError";
  }
}

interface Pending {
  resolve: (result: RequestJobResult) => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

interface Slot {
  worker: Worker;
  pending: Map<number, Pending>;
  /** Its modules are loaded: messages sent now are handled. Until then they wait in `queued`. */
  ready: boolean;
  queued: { message: ToRequestWorker; transfer: Transferable[] }[];
}

export interface RequestWorkerPoolOptions {
  size: number;
  /** A job not answered by then fails, and its worker is replaced. */
  timeoutMs: number;
  log?: (message: string, fields?: Record<string, unknown>) => void;
}

export class RequestWorkerPool {
  readonly #options: RequestWorkerPoolOptions;
  readonly #slots: Slot[] = [];
  #nextId = 1;
  #closed = false;

  constructor(options: RequestWorkerPoolOptions) {
    this.#options = options;
    for (let i = 0; i < Math.max(1, options.size); i++) this.#slots.push(this.#spawn());
  }

  /**
   * A body parsed and validated (src/openai/request.ts) on a worker. `bytes` is transferred there
   * (unusable here) and comes back in the answer.
   */
  parse(
    endpoint: JsonEndpoint,
    bytes: Uint8Array<ArrayBuffer>,
    maxPromptChars: ReadonlyMap<string, number>,
  ): Promise<RequestJobResult> {
    return this.#run({ kind: "parse", endpoint, bytes, maxPromptChars }, [bytes.buffer]);
  }

  /** `scheme.hashed(tokens, extra)` on a worker. */
  async hash(
    scheme: KeySchemeOptions,
    tokens: readonly number[],
    extra?: ExtraKeys,
  ): Promise<HashedPrompt> {
    const ids = Uint32Array.from(tokens);
    const result = await this.#run({ kind: "hash", scheme, tokens: ids, extra }, [ids.buffer]);
    if (result.kind !== "hashed") throw new Error(`unexpected ${result.kind} answer to a hash`);
    return { blockHashes: result.blockHashes, chunkKeys: result.chunkKeys };
  }

  /**
   * Resolves once every worker has loaded, or after `timeoutMs` (true when all did); jobs need
   * not wait for it.
   */
  async ready(timeoutMs = 60_000): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    const loading = () => !this.#closed && this.#slots.some((slot) => !slot.ready);
    while (loading() && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return !loading();
  }

  close(): void {
    this.#closed = true;
    for (const slot of this.#slots) this.#fail(slot, "the request worker pool was closed");
  }

  #run(job: RequestJob, transfer: Transferable[] = []): Promise<RequestJobResult> {
    if (this.#closed) return Promise.reject(new Error("the request worker pool was closed"));
    const slot = this.#slots.reduce((a, b) => (b.pending.size < a.pending.size ? b : a));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#replace(slot, `a ${job.kind} job took longer than ${this.#options.timeoutMs} ms`);
      }, this.#options.timeoutMs);
      slot.pending.set(id, { resolve, reject, timer });
      const message: ToRequestWorker = { id, job };
      try {
        if (slot.ready) slot.worker.postMessage(message, transfer);
        else slot.queued.push({ message, transfer });
      } catch (error) {
        // Not copyable to a worker (nested too deep): the caller does the work itself.
        clearTimeout(timer);
        slot.pending.delete(id);
        reject(error as Error);
      }
    });
  }

  #spawn(): Slot {
    const worker = new Worker(new URL("./request_worker.ts", import.meta.url), { type: "module" });
    const slot: Slot = { worker, pending: new Map(), ready: false, queued: [] };
    worker.onmessage = (event: MessageEvent<FromRequestWorker>) => {
      const message = event.data;
      if ("ready" in message) return this.#ready(slot);
      const pending = slot.pending.get(message.id);
      if (!pending) return;
      slot.pending.delete(message.id);
      clearTimeout(pending.timer);
      if (message.ok) pending.resolve(message.result);
      else pending.reject(new RequestWorkerError(message.message, message.bytes));
    };
    worker.onerror = (event: ErrorEvent) => {
      event.preventDefault(); // a worker's crash must not take the router down
      this.#replace(slot, `request worker crashed: ${event.message}`);
    };
    return slot;
  }

  /** Sends what waited for the worker to load; one it cannot take fails alone. */
  #ready(slot: Slot): void {
    slot.ready = true;
    for (const { message, transfer } of slot.queued.splice(0)) {
      try {
        slot.worker.postMessage(message, transfer);
      } catch (error) {
        const pending = slot.pending.get(message.id);
        slot.pending.delete(message.id);
        if (pending) clearTimeout(pending.timer);
        pending?.reject(error as Error);
      }
    }
  }

  #replace(slot: Slot, reason: string): void {
    this.#fail(slot, reason);
    const at = this.#slots.indexOf(slot);
    if (at < 0 || this.#closed) return;
    this.#options.log?.("request worker replaced", { level: "warn", reason });
    this.#slots[at] = this.#spawn();
  }

  #fail(slot: Slot, reason: string): void {
    slot.worker.terminate();
    slot.queued.length = 0;
    for (const pending of slot.pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(new Error(reason));
    }
    slot.pending.clear();
  }
}

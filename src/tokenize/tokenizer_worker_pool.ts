/**
 * A pool of Deno Workers, each with its own copy of one tokenizer (tokenize_worker.ts), so that
 * long prompts are tokenized off the main loop and on every core. Every call has a deadline: a
 * call waits for a loaded worker at most that long, a worker that misses it or crashes is
 * replaced, and its calls fail at once (the request is then dispatched by load, never held and
 * never tokenized on the main loop instead).
 */
import { TokenizeInputError } from "./errors.ts";
import { plainIds } from "./plain_ids.ts";
import type { EncodeJob, FromWorker, TokenizerSpec, ToWorker } from "./worker_protocol.ts";

export interface TokenizerWorkerPoolOptions {
  spec: TokenizerSpec;
  size: number;
  /** A call not answered by then fails, and its worker is replaced. */
  timeoutMs: number;
  /** Makes a worker; tests pass one that hangs or crashes. */
  createWorker?: () => Worker;
  log?: (message: string, fields?: Record<string, unknown>) => void;
}

interface Pending {
  resolve: (ids: number[]) => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** A call waiting for a worker to finish loading. */
interface Waiting {
  job: EncodeJob;
  affinity: number;
  resolve: (ids: number[]) => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** Calls that may wait for a loading worker at once; more fail at once. */
const MAX_WAITING = 1_024;

interface Slot {
  worker: Worker;
  ready: boolean;
  /** Stopped for good (it failed to load, or the pool closed); a replaced one is not reused. */
  retired: boolean;
  pending: Map<number, Pending>;
}

export class TokenizerWorkerPool {
  readonly #options: TokenizerWorkerPoolOptions;
  readonly #slots: Slot[] = [];
  readonly #waiting: Waiting[] = [];
  #nextId = 1;
  #closed = false;
  #replaced = 0;

  constructor(options: TokenizerWorkerPoolOptions) {
    this.#options = options;
  }

  /** Workers started (`start()` or the first call starts them). */
  get size(): number {
    return this.#slots.length;
  }

  /** Workers that have loaded their tokenizer. */
  get readyWorkers(): number {
    return this.#slots.filter((slot) => slot.ready).length;
  }

  /** Workers still loading their tokenizer (neither ready nor retired). */
  get loadingWorkers(): number {
    return this.#slots.filter((slot) => !slot.ready && !slot.retired).length;
  }

  /** Workers replaced after a crash, a missed deadline or a failed load. */
  get replacedWorkers(): number {
    return this.#replaced;
  }

  /** Starts the workers (they load their tokenizer meanwhile); idempotent. */
  start(): void {
    if (this.#closed) return;
    while (this.#slots.length < Math.max(1, this.#options.size)) this.#slots.push(this.#spawn());
  }

  /**
   * Encodes on a loaded worker, preferring the one `affinity` names (a conversation's turns then
   * meet their own segment cache). While workers are still loading the call waits for one, within
   * its deadline; it fails when none is ready by then or none can ever be (closed, or every
   * worker failed to load).
   */
  encode(job: EncodeJob, affinity: number): Promise<number[]> {
    this.start();
    const slot = this.#choose(affinity);
    if (slot) return this.#send(slot, job);
    if (this.#closed || this.#slots.every((s) => s.retired)) {
      return Promise.reject(new Error("no tokenizer worker can take the call"));
    }
    if (this.#waiting.length >= MAX_WAITING) {
      return Promise.reject(new Error(`${MAX_WAITING} calls already wait for a tokenizer worker`));
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiting.splice(this.#waiting.indexOf(waiting), 1);
        reject(new Error(`no tokenizer worker was ready within ${this.#options.timeoutMs} ms`));
      }, this.#options.timeoutMs);
      const waiting: Waiting = { job, affinity, resolve, reject, timer };
      this.#waiting.push(waiting);
    });
  }

  /** Stops every worker; calls in flight and waiting fail. */
  close(): void {
    this.#closed = true;
    for (const slot of this.#slots) this.#retire(slot, "the tokenizer pool was closed");
    this.#failWaiting("the tokenizer pool was closed");
  }

  #send(slot: Slot, job: EncodeJob): Promise<number[]> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.#timedOut(slot, id), this.#options.timeoutMs);
      slot.pending.set(id, { resolve, reject, timer });
      slot.worker.postMessage({ type: "encode", id, job } satisfies ToWorker);
    });
  }

  /** Hands the waiting calls to the workers now loaded. */
  #dispatchWaiting(): void {
    for (const waiting of this.#waiting.splice(0)) {
      clearTimeout(waiting.timer);
      const slot = this.#choose(waiting.affinity);
      if (slot) this.#send(slot, waiting.job).then(waiting.resolve, waiting.reject);
      else waiting.reject(new Error("no tokenizer worker can take the call"));
    }
  }

  #failWaiting(reason: string): void {
    for (const waiting of this.#waiting.splice(0)) {
      clearTimeout(waiting.timer);
      waiting.reject(new Error(reason));
    }
  }

  #choose(affinity: number): Slot | undefined {
    const ready = this.#slots.filter((slot) => slot.ready);
    if (ready.length === 0) return undefined;
    const least = ready.reduce((a, b) => (b.pending.size < a.pending.size ? b : a));
    const preferred = this.#slots[Math.abs(affinity) % this.#slots.length];
    // Affinity gives way when its worker is clearly busier than another.
    return preferred.ready && preferred.pending.size <= least.pending.size + 1 ? preferred : least;
  }

  #spawn(): Slot {
    const worker = this.#options.createWorker?.() ??
      new Worker(new URL("./tokenize_worker.ts", import.meta.url), { type: "module" });
    const slot: Slot = { worker, ready: false, retired: false, pending: new Map() };
    worker.onmessage = (event: MessageEvent<FromWorker>) => this.#received(slot, event.data);
    worker.onerror = (event: ErrorEvent) => {
      event.preventDefault(); // a worker's crash must not take the router down
      this.#replace(slot, `tokenizer worker crashed: ${event.message}`);
    };
    worker.postMessage({ type: "load", spec: this.#options.spec } satisfies ToWorker);
    return slot;
  }

  #received(slot: Slot, message: FromWorker): void {
    if (message.type === "loaded") {
      slot.ready = true;
      this.#dispatchWaiting();
    } else if (message.type === "load_failed") {
      this.#options.log?.("tokenizer worker could not load its tokenizer", {
        level: "error",
        error: message.message,
      });
      this.#retire(slot, message.message);
      if (this.#slots.every((s) => s.retired)) this.#failWaiting(message.message);
    } else {
      const pending = slot.pending.get(message.id);
      if (!pending) return;
      slot.pending.delete(message.id);
      clearTimeout(pending.timer);
      if (message.type === "encoded") pending.resolve(plainIds(message.ids));
      else pending.reject(errorOf(message.failure));
    }
  }

  #timedOut(slot: Slot, id: number): void {
    if (!slot.pending.has(id)) return;
    this.#replace(slot, `tokenizing took longer than ${this.#options.timeoutMs} ms`);
  }

  /** Fails the slot's calls, stops its worker and starts a new one in its place. */
  #replace(slot: Slot, reason: string): void {
    const at = this.#slots.indexOf(slot);
    this.#retire(slot, reason);
    if (at < 0 || this.#closed) return;
    this.#replaced++;
    this.#options.log?.("tokenizer worker replaced", { level: "warn", reason });
    this.#slots[at] = this.#spawn();
  }

  #retire(slot: Slot, reason: string): void {
    slot.ready = false;
    slot.retired = true;
    slot.worker.terminate();
    for (const pending of slot.pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(new Error(reason));
    }
    slot.pending.clear();
  }
}

function errorOf(failure: { kind: string; name: string; message: string }): Error {
  const error = failure.kind === "input"
    ? new TokenizeInputError(failure.message)
    : new Error(failure.message);
  error.name = failure.name;
  return error;
}

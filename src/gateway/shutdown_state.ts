/**
 * The router's shutdown as the request path sees it: draining (readiness fails, requests are still
 * served) and then, past the drain deadline, the cut that ends what is still in flight.
 */
export class ShutdownState {
  readonly #cut = new AbortController();
  readonly #drain = new AbortController();

  get draining(): boolean {
    return this.#drain.signal.aborted;
  }

  /** Aborts, with a `RouterShutdownError`, every engine call and answer still in flight. */
  get cutSignal(): AbortSignal {
    return this.#cut.signal;
  }

  /** Aborts when draining begins: what waits to be admitted is answered then (flow_control.ts). */
  get drainSignal(): AbortSignal {
    return this.#drain.signal;
  }

  beginDraining(): void {
    this.#drain.abort();
  }

  cut(): void {
    this.beginDraining();
    this.#cut.abort(new RouterShutdownError());
  }
}

/** Ends a request the router could not finish before it stopped: not the engine's fault. */
export class RouterShutdownError extends Error {
  constructor() {
    super("the router is shutting down");
    this.name = "RouterShutdownError";
  }
}

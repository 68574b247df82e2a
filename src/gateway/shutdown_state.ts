/**
 * The router's shutdown as the request path sees it: draining (readiness fails, requests are still
 * served) and then, past the drain deadline, the cut that ends what is still in flight.
 */
export class ShutdownState {
  #draining = false;
  readonly #cut = new AbortController();

  get draining(): boolean {
    return this.#draining;
  }

  /** Aborts, with a `RouterShutdownError`, every engine call and answer still in flight. */
  get cutSignal(): AbortSignal {
    return this.#cut.signal;
  }

  beginDraining(): void {
    this.#draining = true;
  }

  cut(): void {
    this.#draining = true;
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

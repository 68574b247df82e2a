/**
 * Counts tokenizer failures and logs an outage once, not once per request: the first failure after
 * a success is logged, the following ones only counted, until a success re-arms the log.
 * `onFailure` sees every failure (metrics).
 */
import { TokenizeUnavailableError } from "./errors.ts";

export interface TokenizeFailureEvent {
  /** The tokenizer mode that failed (`local`, `engine`). */
  mode: string;
  /** What was being tokenized. */
  kind: "text" | "chat";
  error: Error;
  /** Failures so far, this one included. */
  count: number;
}

export interface TokenizeFailureLogOptions {
  /** Names the tokenizer in the log line (a model name). */
  label?: string;
  /** Called on every failure. */
  onFailure?: (event: TokenizeFailureEvent) => void;
  /** Where the one line per outage goes (default console.warn). */
  log?: (message: string) => void;
}

export class TokenizeFailureLog {
  readonly #options: TokenizeFailureLogOptions;
  #count = 0;
  #logged = false;

  constructor(options: TokenizeFailureLogOptions = {}) {
    this.#options = options;
  }

  get count(): number {
    return this.#count;
  }

  record(mode: string, kind: "text" | "chat", error: Error): void {
    this.#count++;
    this.#options.onFailure?.({ mode, kind, error, count: this.#count });
    if (this.#logged) return;
    this.#logged = true;
    const who = this.#options.label ? ` for ${this.#options.label}` : "";
    (this.#options.log ?? console.warn)(
      `Tokenizer (${mode})${who} failed: ${error.message}. Requests are dispatched by load only ` +
        "until it recovers; further failures are counted, not logged.",
    );
  }

  /** Records a tokenizer's own failure; returns the error to reject with (load-only dispatch). */
  unavailable(
    mode: "local" | "engine",
    kind: "text" | "chat",
    error: unknown,
  ): TokenizeUnavailableError {
    const cause = error instanceof Error ? error : new Error(String(error));
    this.record(mode, kind, cause);
    const who = mode === "local" ? "Local" : "Engine";
    return new TokenizeUnavailableError("failed", `${who} tokenizer failed: ${cause.message}`, {
      cause,
    });
  }

  /** A success after failures re-arms the log, so the next outage is reported too. */
  recordSuccess(): void {
    this.#logged = false;
  }
}

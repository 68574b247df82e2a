/**
 * Timer functions the cluster edges take as a parameter, so tests can drive time by hand.
 */
export interface Timers {
  /** Returns a handle that `clearTimeout` accepts. */
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The runtime's own timers. */
export function systemTimers(): Timers {
  return {
    setTimeout: (callback, ms) => setTimeout(callback, ms),
    clearTimeout: (handle) => clearTimeout(handle as number),
  };
}

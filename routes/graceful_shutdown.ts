import type { ShutdownState } from "../src/gateway/shutdown_state.ts";

export interface DrainOptions {
  /** Keep serving this long after `/readyz` turns 503. */
  readyDelayMs: number;
  /** Then wait this long for in-flight requests before ending them. */
  drainTimeoutMs: number;
  /** Aborted (a second SIGTERM): skip what is left of both waits. */
  hurry?: AbortSignal;
}

/** How a drain ended: everything finished on its own, or the rest was cut at the deadline. */
export type DrainOutcome = "drained" | "cut";

/** After the cut, how long the ended streams get to flush their error events. */
const CUT_FLUSH_MS = 2_000;

/**
 * Shutdown in the order load balancers need: readiness fails while requests are still served,
 * then the listener closes and in-flight requests drain up to a deadline; whatever is left ends
 * with an error event (its leases are released as the answers end).
 */
export async function drainServer(
  shutdown: ShutdownState,
  server: Pick<Deno.HttpServer, "shutdown"> | undefined,
  options: DrainOptions,
  log: (message: string, fields?: Record<string, unknown>) => void,
): Promise<DrainOutcome> {
  shutdown.beginDraining();
  log("draining: /readyz now answers 503", { readyDelayMs: options.readyDelayMs });
  await delay(options.readyDelayMs, options.hurry);
  const stopped = server ? server.shutdown() : Promise.resolve();
  const drained = await within(stopped, options.drainTimeoutMs, options.hurry);
  if (drained) return "drained";
  log("drain deadline passed: ending the requests still in flight", {
    drainTimeoutMs: options.drainTimeoutMs,
  });
  shutdown.cut();
  await within(stopped, CUT_FLUSH_MS);
  return "cut";
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted || ms <= 0) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** Whether `work` settled within `ms` (false at once when `signal` aborts). */
async function within(work: Promise<unknown>, ms: number, signal?: AbortSignal): Promise<boolean> {
  let settled = false;
  const watched = work.then(() => settled = true, () => settled = true);
  const waiting = new AbortController();
  const stop = signal ? AbortSignal.any([signal, waiting.signal]) : waiting.signal;
  await Promise.race([watched, delay(ms, stop)]);
  waiting.abort();
  return settled;
}

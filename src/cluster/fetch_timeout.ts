/**
 * One HTTP exchange with a deadline that covers the body too: a server that sends headers and
 * then stalls times out like one that never answers. Edge helper: `fetch` and timers are passed in.
 */
import type { Timers } from "./timers.ts";

export class FetchTimeoutError extends Error {
  override name = "FetchTimeoutError";
}

export interface FetchTimeoutOptions {
  fetch: typeof fetch;
  timers: Timers;
  timeoutMs: number;
  init?: RequestInit;
}

/**
 * Fetches `url` and runs `read` on the response, all within `timeoutMs`; on expiry the request is
 * aborted and a FetchTimeoutError thrown. `read` must consume or cancel the body.
 */
export async function fetchWithTimeout<T>(
  url: string,
  options: FetchTimeoutOptions,
  read: (response: Response) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  let timer: unknown;
  const expired = new Promise<never>((_resolve, reject) => {
    timer = options.timers.setTimeout(() => {
      const error = new FetchTimeoutError(
        `no complete answer from ${url} within ${options.timeoutMs} ms`,
      );
      controller.abort(error);
      reject(error);
    }, options.timeoutMs);
  });
  // Settles `expired` quietly when the exchange wins the race.
  expired.catch(() => {});
  const exchange = (async () => {
    const response = await options.fetch(url, { ...options.init, signal: controller.signal });
    return await read(response);
  })();
  try {
    return await Promise.race([exchange, expired]);
  } catch (error) {
    if (controller.signal.aborted) {
      exchange.catch(() => {});
      throw controller.signal.reason instanceof FetchTimeoutError
        ? controller.signal.reason
        : error;
    }
    throw error;
  } finally {
    options.timers.clearTimeout(timer);
  }
}

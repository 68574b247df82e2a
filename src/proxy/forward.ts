/** One backend the request may be sent to, in the policy's ranking order. */
export interface ForwardTarget {
  id: string;
  /** Base URL of the engine, e.g. `http://10.0.0.5:8000`. */
  url: string;
}

/** Why an attempt did not produce a response worth returning. */
export type AttemptFailure = "connect_error" | "timeout" | "http_5xx";

export interface AttemptRecord {
  instanceId: string;
  startedAt: number;
  /** When response headers arrived (time to first byte of the upstream response). */
  headersAt?: number;
  status?: number;
  failure?: AttemptFailure;
  error?: string;
}

export interface ForwardRequest {
  method: string;
  /** Path and query to request on the engine, e.g. `/v1/chat/completions`. */
  path: string;
  headers: Headers;
  body: Uint8Array<ArrayBuffer>;
  targets: readonly ForwardTarget[];
  /** The first try plus retries; the default is 3 (at most 2 retries). */
  maxAttempts: number;
  headersTimeoutMs: number;
  /** Aborts while waiting for headers (client gone). Not used after headers arrive. */
  signal?: AbortSignal;
}

export interface ForwardHooks {
  /** Return false to skip a target (e.g. its breaker allows no trial now). */
  beforeAttempt?(target: ForwardTarget, attempt: number): boolean;
  afterAttempt?(target: ForwardTarget, record: AttemptRecord): void;
}

export interface ForwardDeps {
  fetch: typeof fetch;
  now: () => number;
}

export type ForwardOutcome =
  | { kind: "response"; target: ForwardTarget; response: Response; attempts: AttemptRecord[] }
  | { kind: "failed"; status: 502 | 504; message: string; attempts: AttemptRecord[] }
  | { kind: "client_gone"; attempts: AttemptRecord[] };

class HeadersTimeout extends Error {}

/**
 * Sends the request to the best target and, while nothing has reached the client, retries on the
 * next ones: when the connection is refused, no headers arrive in time, or the engine answers 5xx.
 * A 4xx is the engine's verdict on the request and is returned as is.
 */
export async function forwardWithRetries(
  request: ForwardRequest,
  deps: ForwardDeps,
  hooks: ForwardHooks = {},
): Promise<ForwardOutcome> {
  const attempts: AttemptRecord[] = [];
  for (const target of request.targets) {
    if (attempts.length >= request.maxAttempts) break;
    if (request.signal?.aborted) return { kind: "client_gone", attempts };
    if (hooks.beforeAttempt && hooks.beforeAttempt(target, attempts.length) === false) continue;
    const record: AttemptRecord = { instanceId: target.id, startedAt: deps.now() };
    attempts.push(record);
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new HeadersTimeout("no response headers in time")),
      request.headersTimeoutMs,
    );
    const onClientAbort = () => controller.abort(request.signal?.reason);
    request.signal?.addEventListener("abort", onClientAbort, { once: true });
    let response: Response | undefined;
    try {
      response = await deps.fetch(joinUrl(target.url, request.path), {
        method: request.method,
        headers: request.headers,
        body: request.body.byteLength ? request.body : undefined,
        signal: controller.signal,
      });
      record.headersAt = deps.now();
      record.status = response.status;
    } catch (error) {
      if (request.signal?.aborted) {
        hooks.afterAttempt?.(target, record);
        return { kind: "client_gone", attempts };
      }
      const timedOut = controller.signal.reason instanceof HeadersTimeout;
      record.failure = timedOut ? "timeout" : "connect_error";
      record.error = timedOut
        ? `no response headers within ${request.headersTimeoutMs} ms`
        : (error as Error).message;
    } finally {
      clearTimeout(timer);
      request.signal?.removeEventListener("abort", onClientAbort);
    }
    if (response && response.status >= 500) {
      record.failure = "http_5xx";
      record.error = `HTTP ${response.status}`;
      await response.body?.cancel().catch(() => {});
      response = undefined;
    }
    hooks.afterAttempt?.(target, record);
    if (response) return { kind: "response", target, response, attempts };
  }
  if (attempts.length === 0) {
    return { kind: "failed", status: 502, message: "No instance could take the request", attempts };
  }
  const allTimeouts = attempts.every((a) => a.failure === "timeout");
  const summary = attempts.map((a) => `${a.instanceId}: ${a.error ?? a.failure}`).join("; ");
  return allTimeouts
    ? {
      kind: "failed",
      status: 504,
      message: `Upstream timed out on ${attempts.length} attempt(s) (${summary})`,
      attempts,
    }
    : {
      kind: "failed",
      status: 502,
      message: `All ${attempts.length} upstream attempt(s) failed (${summary})`,
      attempts,
    };
}

export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, "") + (path.startsWith("/") ? path : `/${path}`);
}

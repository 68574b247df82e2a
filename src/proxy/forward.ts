/** One backend the request may be sent to, in the policy's ranking order. */
export interface ForwardTarget {
  id: string;
  /** Base URL of the engine, e.g. `http://10.0.0.5:8000`. */
  url: string;
}

/**
 * Why an attempt did not produce a response worth returning: no connection (`connect_error`), a
 * connection the engine closed after taking the request and before answering
 * (`connection_dropped`: a crash, or a body it chokes on), no headers in time, a 5xx, or (for a
 * load-routed request, `notFoundMeansNotServed`) a 404: the engine does not serve the route.
 */
export type AttemptFailure =
  | "connect_error"
  | "connection_dropped"
  | "timeout"
  | "http_5xx"
  | "not_served";

export interface AttemptRecord {
  instanceId: string;
  /** The P/D leg it belongs to, for a disaggregated request. */
  leg?: "prefill" | "decode";
  startedAt: number;
  /** When response headers arrived (time to first byte of the upstream response). */
  headersAt?: number;
  status?: number;
  failure?: AttemptFailure;
  error?: string;
}

/** A body sent as it arrives: each attempt opens it from its first byte, while it can. */
export interface StreamedBody {
  readonly replayable: boolean;
  open(): ReadableStream<Uint8Array>;
}

export interface ForwardRequest {
  method: string;
  /** Path and query to request on the engine, e.g. `/v1/chat/completions`. */
  path: string;
  headers: Headers;
  /** The bytes to send, or an upload streamed as it arrives (replayed while it can be). */
  body: Uint8Array<ArrayBuffer> | StreamedBody;
  targets: readonly ForwardTarget[];
  /** The first try plus retries (default config: 3, i.e. at most 2 retries). */
  maxAttempts: number;
  headersTimeoutMs: number;
  /** Aborts while waiting for headers (client gone). Not used after headers arrive. */
  signal?: AbortSignal;
  /** A 404 says the engine lacks the route (a pooling route on a generative model): try the next. */
  notFoundMeansNotServed?: boolean;
}

export interface ForwardHooks {
  /** Return false to skip a target (e.g. its breaker allows no trial now). */
  beforeAttempt?(target: ForwardTarget, attempt: number): boolean;
  afterAttempt?(target: ForwardTarget, record: AttemptRecord): void;
  /** Once every attempt is over, whatever the outcome (verdicts that need the whole request). */
  afterAll?(attempts: readonly AttemptRecord[], outcome: ForwardOutcome["kind"]): void;
}

export interface ForwardDeps {
  fetch: typeof fetch;
  now: () => number;
}

export type ForwardOutcome =
  | { kind: "response"; target: ForwardTarget; response: Response; attempts: AttemptRecord[] }
  | { kind: "failed"; status: 404 | 502 | 504; message: string; attempts: AttemptRecord[] }
  | { kind: "client_gone"; attempts: AttemptRecord[] };

class HeadersTimeout extends Error {}

/** How much of an engine's 5xx body is read for its message, and for how long at most. */
const ERROR_BODY_MAX_BYTES = 4096;
const ERROR_BODY_TIMEOUT_MS = 1_000;

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
  const outcome = await attemptInTurn(request, deps, hooks);
  hooks.afterAll?.(outcome.attempts, outcome.kind);
  return outcome;
}

async function attemptInTurn(
  request: ForwardRequest,
  deps: ForwardDeps,
  hooks: ForwardHooks,
): Promise<ForwardOutcome> {
  const attempts: AttemptRecord[] = [];
  for (const target of request.targets) {
    if (attempts.length >= request.maxAttempts) break;
    if (request.signal?.aborted) return { kind: "client_gone", attempts };
    // An upload whose first bytes are gone (or that the client broke off) cannot be sent again.
    if (!(request.body instanceof Uint8Array) && !request.body.replayable) break;
    if (hooks.beforeAttempt && hooks.beforeAttempt(target, attempts.length) === false) continue;
    const record: AttemptRecord = { instanceId: target.id, startedAt: deps.now() };
    attempts.push(record);
    const response = await attemptOnce(request, deps, target, record);
    hooks.afterAttempt?.(target, record);
    if (response === "client_gone") return { kind: "client_gone", attempts };
    if (response) return { kind: "response", target, response, attempts };
    if (failedTheSameWayBefore(attempts)) return failedOutcome(attempts, true);
  }
  return failedOutcome(attempts);
}

/**
 * The last attempt failed as an earlier one did on another instance, the same engine error or
 * both connections dropped after the request was sent: the request itself is the likely cause (a
 * poison request), and more engines would only fail it again.
 */
function failedTheSameWayBefore(attempts: readonly AttemptRecord[]): boolean {
  const last = attempts.at(-1);
  if (last?.failure === "connection_dropped") {
    return attempts.some((a) => a !== last && a.failure === "connection_dropped");
  }
  if (last?.failure !== "http_5xx") return false;
  return attempts.some((a) => a !== last && a.failure === "http_5xx" && a.error === last.error);
}

/**
 * Whether a failed fetch had reached the engine: the connection was made and the request sent
 * (Deno's client says `SendRequest`, not `Connect`), then it broke before any answer.
 */
function droppedAfterSending(error: unknown): boolean {
  const message = `${(error as Error)?.message ?? ""} ${(error as Error)?.cause ?? ""}`;
  if (/\(Connect\)|connection refused|dns error/i.test(message)) return false;
  return /\(SendRequest\)|connection closed before message completed|connection reset/i.test(
    message,
  );
}

/** One attempt: the response worth returning, undefined when it failed, or "client_gone". */
async function attemptOnce(
  request: ForwardRequest,
  deps: ForwardDeps,
  target: ForwardTarget,
  record: AttemptRecord,
): Promise<Response | undefined | "client_gone"> {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new HeadersTimeout("no response headers in time")),
    request.headersTimeoutMs,
  );
  const onClientAbort = () => controller.abort(request.signal?.reason);
  request.signal?.addEventListener("abort", onClientAbort, { once: true });
  let response: Response;
  try {
    response = await deps.fetch(joinUrl(target.url, request.path), {
      method: request.method,
      headers: request.headers,
      body: bodyOf(request.body),
      signal: controller.signal,
    });
    record.headersAt = deps.now();
    record.status = response.status;
  } catch (error) {
    if (request.signal?.aborted) return "client_gone";
    const timedOut = controller.signal.reason instanceof HeadersTimeout;
    record.failure = timedOut
      ? "timeout"
      : droppedAfterSending(error)
      ? "connection_dropped"
      : "connect_error";
    record.error = timedOut
      ? `no response headers within ${request.headersTimeoutMs} ms`
      : (error as Error).message;
    return undefined;
  } finally {
    clearTimeout(timer);
    request.signal?.removeEventListener("abort", onClientAbort);
  }
  if (response.status === 404 && request.notFoundMeansNotServed) {
    record.failure = "not_served";
    record.error = `HTTP 404: ${request.path} is not served`;
    response.body?.cancel().catch(() => {});
    return undefined;
  }
  if (response.status < 500) return response;
  record.failure = "http_5xx";
  const message = await engineErrorMessage(response);
  record.error = `HTTP ${response.status}${message ? `: ${message}` : ""}`;
  return undefined;
}

function bodyOf(body: ForwardRequest["body"]): BodyInit | undefined {
  if (!(body instanceof Uint8Array)) return body.open();
  return body.byteLength ? body : undefined;
}

/** The 502/504 after every attempt failed, naming each attempt's error. */
function failedOutcome(attempts: AttemptRecord[], repeated = false): ForwardOutcome {
  if (attempts.length === 0) {
    return { kind: "failed", status: 502, message: "No instance could take the request", attempts };
  }
  if (attempts.every((a) => a.failure === "not_served")) {
    const ids = attempts.map((a) => a.instanceId).join(", ");
    return { kind: "failed", status: 404, message: `Not served by ${ids}`, attempts };
  }
  const allTimeouts = attempts.every((a) => a.failure === "timeout");
  const summary = attempts.map((a) => `${a.instanceId}: ${a.error ?? a.failure}`).join("; ");
  if (repeated) {
    const what = attempts.at(-1)?.failure === "connection_dropped"
      ? "Two instances closed the connection on this request"
      : "The same engine error on two instances";
    const message = `${what}: the request itself is the likely ` +
      `cause, so it is not retried further (${summary})`;
    return { kind: "failed", status: 502, message, attempts };
  }
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

/**
 * The engine's own words from a 5xx body (OpenAI's `error.message`, vLLM's `message`, or the
 * text), read up to a few KiB and a second so that a hanging error body cannot hold the retry.
 */
export async function engineErrorMessage(response: Response): Promise<string> {
  const { text } = await readBodyText(response, {
    maxBytes: ERROR_BODY_MAX_BYTES,
    timeoutMs: ERROR_BODY_TIMEOUT_MS,
  });
  return messageOf(text).replace(/\s+/g, " ").trim().slice(0, 500);
}

/**
 * A response body as text, read up to `maxBytes` and for at most `timeoutMs` (or until `signal`
 * aborts); the body is cancelled after. `complete`: it ended within those bounds.
 */
export async function readBodyText(
  response: Response,
  bounds: { maxBytes: number; timeoutMs: number; signal?: AbortSignal },
): Promise<{ text: string; complete: boolean }> {
  const reader = response.body?.getReader();
  if (!reader) return { text: "", complete: true };
  const chunks: Uint8Array[] = [];
  let size = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let complete = false;
  const stop = new Promise<"stop">((resolve) => {
    timer = setTimeout(() => resolve("stop"), bounds.timeoutMs);
    bounds.signal?.addEventListener("abort", () => resolve("stop"), { once: true });
  });
  try {
    while (size < bounds.maxBytes) {
      const read = await Promise.race([reader.read(), stop]);
      if (read === "stop") break;
      if (read.done) {
        complete = true;
        break;
      }
      chunks.push(read.value);
      size += read.value.byteLength;
    }
  } catch {
    // A body that fails mid-read still gives what arrived.
  } finally {
    clearTimeout(timer);
    reader.cancel().catch(() => {});
  }
  const text = new TextDecoder().decode(concat(chunks, size)).slice(0, bounds.maxBytes);
  return { text, complete };
}

function messageOf(text: string): string {
  try {
    const body = JSON.parse(text);
    const message = body?.error?.message ?? body?.message ?? body?.detail;
    if (typeof message === "string") return message;
  } catch {
    // Not JSON: the text itself.
  }
  return text;
}

function concat(chunks: Uint8Array[], size: number): Uint8Array {
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, "") + (path.startsWith("/") ? path : `/${path}`);
}

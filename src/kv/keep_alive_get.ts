/**
 * A `fetch` for the Mooncake master's small GET answers over kept-alive HTTP/1.1 connections.
 * Every long prompt asks the master once; through Deno's `fetch` that round trip cost about 2.5×
 * the CPU it costs over a connection of our own (tests/bench/master_get_bench.ts). Only plain
 * `http:` GETs without a body are served here; anything else goes to the fallback `fetch`.
 */
import { HttpResponseReader } from "./http_response_reader.ts";

export interface KeepAliveGetOptions {
  /** Serves what this client does not (HTTPS, other methods, bodies). */
  fallback: typeof fetch;
  /** Opens a TCP connection (default `Deno.connect`). */
  connect?: (address: { hostname: string; port: number }) => Promise<Deno.Conn>;
  /**
   * Idle connections kept per origin (default 64: about as many lookups as a busy router has in
   * flight, so it does not reopen them); more are closed once answered.
   */
  maxIdlePerOrigin?: number;
  /** Bound of a response's head and body (default 16 MiB): past it the request fails. */
  maxResponseBytes?: number;
  /** Bound of a request whose caller gave no abort signal (default 10 000 ms). */
  timeoutMs?: number;
}

/** A `fetch` that keeps its connections; `close()` closes the idle ones. */
export interface KeepAliveGet {
  fetch: typeof fetch;
  close(): void;
}

interface Origin {
  hostname: string;
  port: number;
  host: string;
}

/** Request targets sent as written: RFC 3986's path and query characters. */
const PLAIN_TARGET = /^\/[A-Za-z0-9\-._~:/?@!$&'()*+,;=%]*$/;
const HTTP_URL = /^http:\/\/([^/?#]*)([^#]*)/;
const encoder = new TextEncoder();

export function keepAliveGet(options: KeepAliveGetOptions): KeepAliveGet {
  const connections = new KeptConnections(options);
  return { fetch: connections.fetch as typeof fetch, close: () => connections.close() };
}

class KeptConnections {
  readonly #options: KeepAliveGetOptions;
  readonly #idle = new Map<string, Deno.Conn[]>();
  readonly #origins = new Map<string, Origin>();
  #closed = false;

  constructor(options: KeepAliveGetOptions) {
    this.#options = options;
  }

  readonly fetch = (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : undefined;
    const parts = url === undefined ? null : HTTP_URL.exec(url);
    const plainGet = parts !== null && (init?.method ?? "GET").toUpperCase() === "GET" &&
      init?.body == null;
    const origin = plainGet ? this.#originOf(parts[1]) : undefined;
    if (!origin) return this.#options.fallback(input, init);
    try {
      return this.#get(url!, origin, requestHead(url!, parts![2], origin, init?.headers), init);
    } catch (error) {
      return Promise.reject(error); // as fetch does: bad headers reject, they do not throw
    }
  };

  /** Closes the idle connections; those still answering close when done. */
  close(): void {
    this.#closed = true;
    for (const conns of this.#idle.values()) for (const conn of conns) closeQuietly(conn);
    this.#idle.clear();
  }

  async #get(url: string, origin: Origin, head: Uint8Array, init: RequestInit | undefined) {
    const signal = init?.signal ?? AbortSignal.timeout(this.#options.timeoutMs ?? 10_000);
    signal.throwIfAborted();
    const maxBytes = this.#options.maxResponseBytes ?? 16 * 1024 * 1024;
    const pooled = this.#idle.get(origin.host)?.pop();
    if (pooled) {
      // A kept connection the master closed meanwhile fails before any answer: ask once more.
      const answer = await exchange(pooled, head, signal, maxBytes).catch((error) => {
        if (signal.aborted) throw signal.reason;
        if (!(error instanceof StaleConnection)) throw error;
        return undefined;
      });
      if (answer) return this.#finish(answer, origin.host, pooled);
    }
    const connect = this.#options.connect ?? ((address) => Deno.connect(address));
    const conn = await untilAborted(connect(origin), signal).catch((error) => {
      if (signal.aborted) throw signal.reason;
      throw new TypeError(`error sending request for url (${url}): ${describe(error)}`);
    });
    const answer = await exchange(conn, head, signal, maxBytes).catch((error) => {
      if (!(error instanceof StaleConnection)) throw error;
      throw new TypeError(`error sending request for url (${url}): ${error.message}`);
    });
    return this.#finish(answer, origin.host, conn);
  }

  /** Keeps the connection for the next GET when it may carry one and the bound allows. */
  #finish(answer: Answer, host: string, conn: Deno.Conn): Response {
    const kept = this.#idle.get(host) ?? [];
    if (
      answer.reusable && !this.#closed && kept.length < (this.#options.maxIdlePerOrigin ?? 64)
    ) {
      kept.push(conn);
      this.#idle.set(host, kept);
    } else closeQuietly(conn);
    return answer.response;
  }

  /** Where to connect for a URL's authority; undefined when it carries credentials. */
  #originOf(authority: string): Origin | undefined {
    let origin = this.#origins.get(authority);
    if (origin) return origin;
    const parsed = URL.parse(`http://${authority}/`);
    if (!parsed || parsed.username || parsed.password) return undefined;
    origin = {
      hostname: parsed.hostname.replace(/^\[(.*)\]$/, "$1"),
      port: Number(parsed.port || 80),
      host: parsed.host,
    };
    if (this.#origins.size < 64) this.#origins.set(authority, origin);
    return origin;
  }
}

/** The request's head; a target outside RFC 3986's characters goes out as `URL` encodes it. */
function requestHead(
  url: string,
  pathAndQuery: string,
  origin: Origin,
  headers: HeadersInit | undefined,
): Uint8Array {
  let target = pathAndQuery.startsWith("/") ? pathAndQuery : `/${pathAndQuery}`;
  if (!PLAIN_TARGET.test(target)) {
    const parsed = new URL(url);
    target = parsed.pathname + parsed.search;
  }
  let head = `GET ${target} HTTP/1.1\r\nhost: ${origin.host}\r\n`;
  for (const [name, value] of new Headers(headers)) {
    if (name !== "host" && name !== "connection") head += `${name}: ${value}\r\n`;
  }
  return encoder.encode(`${head}\r\n`);
}

interface Answer {
  response: Response;
  /** The connection may carry the next request. */
  reusable: boolean;
}

/** The connection failed before any byte of an answer: a kept one the peer had closed. */
class StaleConnection extends Error {}

async function exchange(
  conn: Deno.Conn,
  head: Uint8Array,
  signal: AbortSignal,
  maxBytes: number,
): Promise<Answer> {
  const reader = new HttpResponseReader(conn, maxBytes);
  const onAbort = () => closeQuietly(conn);
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    try {
      signal.throwIfAborted();
      await writeAll(conn, head);
      if (!(await reader.fill())) throw new Error("connection closed before any answer");
    } catch (error) {
      closeQuietly(conn);
      if (signal.aborted) throw signal.reason;
      throw new StaleConnection(describe(error));
    }
    const answer = await reader.read();
    return {
      response: new Response(answer.body, {
        status: answer.status,
        statusText: answer.statusText,
        headers: answer.headers,
      }),
      reusable: answer.reusable,
    };
  } catch (error) {
    closeQuietly(conn);
    if (signal.aborted) throw signal.reason;
    if (error instanceof StaleConnection) throw error;
    throw new TypeError(`error reading a response from the master: ${describe(error)}`);
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/** The connection, unless the signal aborts first (then it is closed once it opens). */
function untilAborted(opening: Promise<Deno.Conn>, signal: AbortSignal): Promise<Deno.Conn> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    opening.then((conn) => {
      signal.removeEventListener("abort", onAbort);
      if (!signal.aborted) return resolve(conn);
      // Aborted while it opened (maybe before the listener was added): rejected either way.
      closeQuietly(conn);
      reject(signal.reason);
    }, (error) => {
      signal.removeEventListener("abort", onAbort);
      reject(error);
    });
  });
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let written = 0;
  while (written < bytes.length) written += await conn.write(bytes.subarray(written));
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

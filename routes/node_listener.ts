/**
 * The router's default listener: `node:http` (Deno's port of Node's server) through Hono's
 * `@hono/node-server` adapter. Chosen over `Deno.serve` for what a gateway needs at the
 * connection level and `Deno.serve` does not offer (tests/gateway/client_connection_test.ts):
 * a deadline for request headers, an idle keep-alive timeout, a cap on open connections, and
 * noticing a client that leaves while its request waits for the engine (`Deno.serve` aborts
 * `request.signal` then only when the body came in the headers' first read).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { getRequestListener } from "@hono/node-server";
import { openAIErrorBody } from "../src/openai/errors.ts";
import type { Listening, ListenOptions } from "./listening.ts";

export function listenNode(options: ListenOptions): Promise<Listening> {
  const { limits } = options;
  const server = createServer({
    // Checked by checkHost(), which answers in OpenAI's shape (Node's own 400 has no body).
    requireHostHeader: false,
    headersTimeout: limits.clientHeaderTimeoutMs,
    requestTimeout: 0, // the body's deadline is the router's own (limits.clientBodyTimeoutMs)
    keepAliveTimeout: limits.clientKeepAliveTimeoutMs,
    // How often Node checks header deadlines; its 30 s default would stretch them by up to that.
    connectionsCheckingInterval: Math.min(1_000, Math.max(50, limits.clientHeaderTimeoutMs / 4)),
  });
  const connections = new Connections(limits.maxConnections);
  server.on("connection", (socket: Socket) => connections.opened(socket));
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Socket) => {
    answerClientError(error, socket, limits.clientHeaderTimeoutMs);
  });
  const honoListener = getRequestListener(
    (request, env) => {
      const answer = options.handler(request, remoteAddrOf(env.incoming));
      return env.incoming.httpVersion === "1.0" ? Promise.resolve(answer).then(unchunked) : answer;
    },
    { overrideGlobalObjects: false, errorHandler: options.onError },
  );
  server.on("request", (request: IncomingMessage, response: ServerResponse) => {
    connections.answering(request.socket, response);
    if (connections.closing) response.setHeader("connection", "close");
    if (connections.isOverCap(request.socket)) return overloaded(response, limits.maxConnections);
    const hostProblem = checkHost(request);
    if (hostProblem) return badRequest(response, hostProblem, "invalid_host");
    honoListener(request, response);
  });
  // A proxy's tunnel request: this router tunnels nothing (Node would close it without a word).
  server.on("connect", (request: IncomingMessage, socket: Socket) => {
    answerOnSocket(socket, 400, "Bad Request", {
      message: `${request.method} is not supported: this router is not a forward proxy.`,
      code: "method_not_supported",
    });
  });
  const finished = new Promise<void>((resolve) => server.on("close", () => resolve()));
  let stopped: Promise<void> | undefined;
  const shutdown = () =>
    stopped ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      connections.close();
    });
  options.signal?.addEventListener("abort", () => shutdown(), { once: true });
  return new Promise((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => reject(listenError(error)));
    server.listen(options.port, options.hostname, () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : options.port;
      const openConnections = () => connections.open;
      resolve({ hostname: options.hostname, port, finished, shutdown, openConnections });
    });
  });
}

/**
 * HTTP/1.0 has no chunked framing, and Node frames a body in chunks whenever the answer's headers
 * ask for it (a relayed answer does: src/gateway/relay_response.ts); without the header Node
 * sends the body as it comes and closes the connection after it. The adapter then reads ahead
 * again, and a body ended by the close cannot show a client that it was cut short: HTTP/1.0
 * clients keep those limits (docs/reliability.md, "Streams").
 */
function unchunked(response: Response): Response {
  if (!response.headers.has("transfer-encoding")) return response;
  const headers = new Headers(response.headers);
  headers.delete("transfer-encoding");
  const { status, statusText } = response;
  return new Response(response.body, { status, statusText, headers });
}

/** A Host header value: a name, an IPv4 address or a bracketed IPv6 one, and an optional port. */
const VALID_HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::\d{1,5})?$/;

/**
 * Why the request's Host cannot be used (RFC 9112 §3.2), or undefined. An HTTP/1.0 request
 * without one is given the address it reached, as HTTP/1.0 predates the header.
 */
function checkHost(request: IncomingMessage): string | undefined {
  const host = request.headers.host;
  if (host === undefined) {
    if (request.httpVersion !== "1.0") {
      return "The request has no Host header (HTTP/1.1 needs one).";
    }
    const { localAddress, localPort } = request.socket;
    const address = localAddress?.includes(":") ? `[${localAddress}]` : localAddress;
    request.headers.host = `${address ?? "localhost"}:${localPort ?? 80}`;
    return undefined;
  }
  if (!VALID_HOST.test(host)) {
    return `The Host header is not a valid host (got ${JSON.stringify(host.slice(0, 100))}).`;
  }
  return undefined;
}

function badRequest(response: ServerResponse, message: string, code: string): void {
  const body = new TextEncoder().encode(JSON.stringify(openAIErrorBody(400, message, { code })));
  response.writeHead(400, {
    "content-type": "application/json",
    "content-length": String(body.byteLength),
    connection: "close",
  });
  response.end(body);
}

/** How long a connection opened beyond the cap may take to send the request it gets a 503 for. */
const OVER_CAP_GRACE_MS = 1_000;

/**
 * Every open connection (held here: Deno's node:http does not reliably find idle ones to close at
 * shutdown), with how many answers each is writing; those opened beyond the cap are marked.
 */
class Connections {
  readonly #answering = new Map<Socket, number>();
  readonly #overCap = new WeakSet<Socket>();
  closing = false;

  constructor(readonly max: number) {}

  get open(): number {
    return this.#answering.size;
  }

  /** A connection beyond the cap is answered 503 on its request, or dropped if it sends none. */
  opened(socket: Socket): void {
    this.#answering.set(socket, 0);
    socket.once("close", () => this.#answering.delete(socket));
    if (this.#answering.size <= this.max) return;
    this.#overCap.add(socket);
    const timer = setTimeout(() => socket.destroy(), OVER_CAP_GRACE_MS);
    socket.once("close", () => clearTimeout(timer));
  }

  /** Counts the answer until it is out; once closing, its connection closes after it. */
  answering(socket: Socket, response: ServerResponse): void {
    const answers = this.#answering.get(socket);
    if (answers === undefined) return; // closed already: nothing to count
    this.#answering.set(socket, answers + 1);
    response.once("close", () => {
      const left = (this.#answering.get(socket) ?? 0) - 1;
      if (left < 0) return; // the connection closed first
      this.#answering.set(socket, left);
      if (this.closing && left === 0) endSoon(socket);
    });
  }

  isOverCap(socket: Socket): boolean {
    return this.#overCap.has(socket);
  }

  /** Closes the idle connections now and the others once their answers are out. */
  close(): void {
    this.closing = true;
    for (const [socket, answers] of this.#answering) if (answers === 0) endSoon(socket);
  }
}

/** Ends a connection after what it has to send, and drops it if the client holds it open. */
function endSoon(socket: Socket): void {
  socket.end();
  const timer = setTimeout(() => socket.destroy(), 2_000);
  socket.once("close", () => clearTimeout(timer));
}

function overloaded(response: ServerResponse, max: number): void {
  const message = `The router has more than ${max} open connections (limits.maxConnections); ` +
    "retry shortly or reuse a connection.";
  const body = JSON.stringify(openAIErrorBody(503, message, { code: "router_overloaded" }));
  response.writeHead(503, {
    "content-type": "application/json",
    "retry-after": "1",
    connection: "close",
  });
  response.end(body);
}

/**
 * What Node's parser refused (bad HTTP, headers over 16 KiB, headers too late), answered in
 * OpenAI's shape instead of Node's empty default; nothing when an answer is already under way.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Socket, headerMs: number): void {
  const answering = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (error.code === "ECONNRESET" || !socket.writable || answering?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, reason, message, code] = error.code === "HPE_HEADER_OVERFLOW"
    ? [
      431,
      "Request Header Fields Too Large",
      "The request headers exceed 16 KiB.",
      "headers_too_large",
    ]
    : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
    ? [
      408,
      "Request Timeout",
      `The request headers did not arrive within ${headerMs} ms (limits.clientHeaderTimeoutMs).`,
      "request_timeout",
    ]
    : [400, "Bad Request", `The request is not valid HTTP/1.1 (${error.code}).`, "bad_http"];
  answerOnSocket(socket, status, reason, { message, code });
}

/** An OpenAI-shaped error written straight to the socket, which then closes. */
function answerOnSocket(
  socket: Socket,
  status: number,
  reason: string,
  error: { message: string; code: string },
): void {
  const body = JSON.stringify(openAIErrorBody(status, error.message, { code: error.code }));
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\n` +
      `content-length: ${
        new TextEncoder().encode(body).length
      }\r\nconnection: close\r\n\r\n${body}`,
  );
}

function remoteAddrOf(incoming: { socket: Socket }): Deno.NetAddr {
  const socket = incoming.socket;
  return {
    transport: "tcp",
    hostname: socket.remoteAddress ?? "",
    port: socket.remotePort ?? 0,
  };
}

/** Node's EADDRINUSE as Deno's error class, which the command line names for the user. */
function listenError(error: NodeJS.ErrnoException): Error {
  if (error.code === "EADDRINUSE") return new Deno.errors.AddrInUse(error.message);
  return error;
}

import type { Config } from "../src/config/schema.ts";
import { bodyTimeout, bodyTooLarge, HttpError } from "../src/openai/errors.ts";

/** The bounds on one request body (`limits.maxBodyBytes`, `limits.clientBodyTimeoutMs`). */
export interface BodyBounds {
  maxBytes: number;
  timeoutMs: number;
}

/** The configured bounds, read per request: a reload's new limits apply at once. */
export function bodyBounds(config: Config): BodyBounds {
  return { maxBytes: config.limits.maxBodyBytes, timeoutMs: config.limits.clientBodyTimeoutMs };
}

/** The client closed its connection before its body was in: nobody is left to answer. */
export class ClientLeftError extends Error {
  constructor() {
    super("the client closed the connection before sending its whole request body");
    this.name = "ClientLeftError";
  }
}

/**
 * The whole request body, within bounds whatever its framing (Content-Length or chunked): a 413
 * as soon as it is known to be too large, a 408 when the client has not sent all of it within
 * `timeoutMs` (a client trickling its body, or stopping half-way, must not hold a request and its
 * memory open), and ClientLeftError when the client goes away meanwhile. Both answers close the
 * connection: the rest of the body will not be read.
 */
export async function readBody(
  request: Request,
  bounds: BodyBounds,
): Promise<Uint8Array<ArrayBuffer>> {
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (declared > bounds.maxBytes && !request.headers.has("transfer-encoding")) {
    throw bodyTooLarge(bounds.maxBytes);
  }
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(bodyTimeout(bounds.timeoutMs)), bounds.timeoutMs);
  });
  try {
    return await Promise.race([readAll(reader, bounds.maxBytes), late]);
  } catch (error) {
    reader.cancel(error).catch(() => {});
    throw error instanceof HttpError ? error : new ClientLeftError();
  } finally {
    clearTimeout(timer);
  }
}

async function readAll(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  maxBytes: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let size = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) throw bodyTooLarge(maxBytes);
    chunks.push(value as Uint8Array<ArrayBuffer>);
  }
  if (chunks.length === 1) return chunks[0];
  const body = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

import { HttpError } from "../src/openai/errors.ts";

/**
 * The whole request body, or a 408 when the client has not sent it within `timeoutMs`: a client
 * trickling its body must not hold a request (and its memory) open forever.
 */
export async function readBodyWithin(
  request: Request,
  timeoutMs: number,
): Promise<Uint8Array<ArrayBuffer>> {
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(bodyTimeout(timeoutMs)), timeoutMs);
  });
  try {
    return await Promise.race([readAll(reader), late]);
  } catch (error) {
    reader.cancel(error).catch(() => {});
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

async function readAll(
  reader: ReadableStreamDefaultReader<Uint8Array>,
): Promise<Uint8Array<ArrayBuffer>> {
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    chunks.push(value as Uint8Array<ArrayBuffer>);
  }
  return new Uint8Array(await new Blob(chunks).arrayBuffer());
}

function bodyTimeout(timeoutMs: number): HttpError {
  return new HttpError(
    408,
    `The request body did not arrive within ${timeoutMs} ms (limits.clientBodyTimeoutMs).`,
    { code: "request_timeout" },
  );
}

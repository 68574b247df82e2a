/**
 * A request body parsed where it costs the main loop least: small bodies inline (a round trip to a
 * worker would cost more), large ones on a request worker (request_worker_pool.ts). Same result,
 * same errors; if the worker fails the body is parsed inline.
 */
import { HttpError } from "../openai/errors.ts";
import { type JsonEndpoint, tokenIdsField } from "../openai/endpoints.ts";
import { parseRequestBody } from "../openai/parse_body.ts";
import { completionPrompt, InvalidRequestError, type ParsedRequest } from "../openai/request.ts";
import { plainIds } from "../tokenize/plain_ids.ts";
import type { RequestWorkerError, RequestWorkerPool } from "./request_worker_pool.ts";
import type { RequestJobResult } from "./request_worker_protocol.ts";

/** Bodies up to this size are parsed inline (well under a millisecond of JSON.parse). */
export const PARSE_INLINE_MAX_BYTES = 256 * 1024;

/**
 * The parsed request, and the body bytes to forward: a large body travels to the worker and back
 * without a copy, so the caller must use the bytes returned here. `maxPromptChars` gives each
 * model name's prompt limit, checked on the worker before a huge prompt comes back.
 */
export async function parseRequest(
  endpoint: JsonEndpoint,
  body: Uint8Array<ArrayBuffer>,
  workers: Pick<RequestWorkerPool, "parse"> | undefined,
  maxPromptChars: () => ReadonlyMap<string, number>,
): Promise<{ parsed: ParsedRequest; bytes: Uint8Array<ArrayBuffer> }> {
  if (!workers || body.byteLength <= PARSE_INLINE_MAX_BYTES) {
    return { parsed: parseRequestBody(endpoint, body), bytes: body };
  }
  // Only a buffer of its own may be transferred (a view may share its buffer with others).
  const own = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength
    ? body
    : body.slice();
  let result: RequestJobResult;
  try {
    result = await workers.parse(endpoint, own, maxPromptChars());
  } catch (error) {
    // The worker failed: parse here, from the bytes it handed back or that never left.
    const back = (error as RequestWorkerError).bytes ?? (own.byteLength > 0 ? own : undefined);
    if (!back) throw unread(error);
    return { parsed: parseRequestBody(endpoint, back), bytes: back };
  }
  if (result.kind === "hashed") throw new Error("unexpected hashed answer to a parse");
  if (result.kind === "refused") {
    const { status, message, param, code, model } = result.refusal;
    if (param === undefined) throw new HttpError(status, message, { code });
    throw new InvalidRequestError(message, param, code, model, status);
  }
  const parsed = withTokens(result.parsed as ParsedRequest, result.tokens, result.tokenBatch);
  return { parsed, bytes: result.bytes };
}

/** The body went to a worker that crashed or timed out: it is gone, the client must send it again. */
function unread(error: unknown): HttpError {
  return new HttpError(
    503,
    `The router could not read this request (${(error as Error)?.message}); send it again.`,
    { code: "router_overloaded", headers: { "retry-after": "1" } },
  );
}

/** Puts the token ids the worker sent apart back into the prompt and the body. */
function withTokens(
  parsed: ParsedRequest,
  tokens: Uint32Array[] | undefined,
  batch: boolean | undefined,
): ParsedRequest {
  if (!tokens || parsed.prompt.kind !== "tokens") return parsed;
  const lists = tokens.map(plainIds);
  const field = tokenIdsField(parsed.endpoint);
  parsed.body[field] = batch ? lists : lists[0];
  parsed.prompt = completionPrompt(parsed.body[field] as number[] | number[][]);
  return parsed;
}

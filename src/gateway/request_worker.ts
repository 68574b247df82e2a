/// <reference lib="deno.worker" />
/**
 * A Worker that does a request's long, CPU-only steps for the main loop: parsing and validating a
 * large body (JSON.parse of 30 MB of token ids takes 150 ms), and chain-hashing a long prompt's
 * store keys. Key schemes are built once per options and kept.
 */
import { createKeyScheme } from "../hashing/key_scheme.ts";
import type { KeyScheme } from "../hashing/types.ts";
import { tokenIdsField } from "../openai/endpoints.ts";
import { HttpError } from "../openai/errors.ts";
import { parseRequestBody } from "../openai/parse_body.ts";
import { InvalidRequestError, type ParsedRequest } from "../openai/request.ts";
import { refuseOversizedPrompt } from "./prompt_limits.ts";
import type {
  FromRequestWorker,
  RequestJob,
  RequestJobResult,
  ToRequestWorker,
} from "./request_worker_protocol.ts";

const schemes = new Map<string, KeyScheme>();

function schemeFor(options: RequestJob & { kind: "hash" }): KeyScheme {
  const key = JSON.stringify(options.scheme);
  let scheme = schemes.get(key);
  if (!scheme) schemes.set(key, scheme = createKeyScheme(options.scheme));
  return scheme;
}

function parse(job: RequestJob & { kind: "parse" }): RequestJobResult {
  const { bytes } = job;
  let parsed: ParsedRequest | undefined;
  try {
    parsed = parseRequestBody(job.endpoint, bytes);
    const limit = job.maxPromptChars.get(parsed.model);
    if (limit !== undefined) refuseOversizedPrompt(limit, parsed.prompt);
  } catch (error) {
    if (!(error instanceof HttpError)) throw error;
    const { param, code } = error.options;
    const model = error instanceof InvalidRequestError ? error.model : parsed?.model;
    const refusal = {
      status: error.status,
      message: error.message,
      param: param ?? undefined,
      code: code === null || code === undefined ? "invalid_value" : String(code),
      model,
    };
    return { kind: "refused", refusal, bytes };
  }
  const prompt = parsed.prompt;
  if (prompt.kind !== "tokens") return { kind: "parsed", parsed, bytes };
  // Token ids go as typed arrays; the body's copy is rebuilt from them on the other side.
  const field = tokenIdsField(parsed.endpoint);
  const batch = parsed.body[field] as number[] | number[][];
  const tokenBatch = typeof batch[0] !== "number";
  const lists = tokenBatch ? batch as number[][] : [batch as number[]];
  const tokens = lists.map((ids) => Uint32Array.from(ids));
  const { [field]: _ids, ...body } = parsed.body;
  return {
    kind: "parsed",
    parsed: { ...parsed, body, prompt: { ...prompt, tokens: [] } },
    bytes,
    tokens,
    tokenBatch,
  };
}

function run(job: RequestJob): RequestJobResult {
  if (job.kind === "parse") return parse(job);
  const scheme = schemeFor(job);
  return { kind: "hashed", ...scheme.hashed(job.tokens, job.extra) };
}

self.onmessage = (event: MessageEvent<ToRequestWorker>) => {
  const { id, job } = event.data;
  let message: FromRequestWorker;
  try {
    message = { id, ok: true, result: run(job) };
  } catch (error) {
    const text = (error as Error)?.message ?? String(error);
    message = { id, ok: false, message: text, bytes: job.kind === "parse" ? job.bytes : undefined };
  }
  const transfer: ArrayBuffer[] = [];
  if (!message.ok && message.bytes) transfer.push(message.bytes.buffer);
  if (message.ok && message.result.kind !== "hashed") transfer.push(message.result.bytes.buffer);
  if (message.ok && message.result.kind === "parsed") {
    for (const ids of message.result.tokens ?? []) transfer.push(ids.buffer as ArrayBuffer);
  }
  try {
    self.postMessage(message, transfer);
  } catch (error) {
    // A result that cannot be copied back: the main loop parses the body itself.
    const bytes = job.kind === "parse" ? job.bytes : undefined;
    const failed: FromRequestWorker = { id, ok: false, message: String(error), bytes };
    self.postMessage(failed, bytes ? [bytes.buffer] : []);
  }
};

self.postMessage({ ready: true } satisfies FromRequestWorker);

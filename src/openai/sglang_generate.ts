/**
 * SGLang's native `POST /generate` (its GenerateReqInput, sglang/srt/managers/io_struct.py): the
 * prompt is `text` (a string or a batch of them) or `input_ids` (token ids or a batch of lists),
 * `sampling_params` an object (or one per prompt), `rid` the request's id (or one per prompt).
 * The router reads the prompt for cache-aware routing like a completions prompt, and `model`, a
 * field SGLang ignores, to choose among several served models. Prompts given as embeddings
 * (`input_embeds`) are routed by load.
 */
import { formatPath } from "../config/load.ts";
import { quoted } from "./errors.ts";
import {
  completionPrompt,
  InvalidRequestError,
  type ParsedRequest,
  parseJsonObject,
  promptProblem,
} from "./request.ts";

export function parseGenerateRequest(endpoint: "generate", bytes: Uint8Array): ParsedRequest {
  const body = parseJsonObject(bytes);
  const model = typeof body.model === "string" ? body.model : undefined;
  const refuse = (param: string, message: string) =>
    new InvalidRequestError(message, param, "invalid_value", model);
  if (body.model !== undefined && body.model !== null && typeof body.model !== "string") {
    throw refuse("model", "Invalid 'model': expected a string");
  }
  const given = PROMPT_FIELDS.filter((field) => body[field] !== undefined && body[field] !== null);
  if (given.length !== 1) {
    // SGLang refuses none with this message; two are ambiguous to the router as well.
    throw refuse(given[1] ?? "text", "Either text, input_ids or input_embeds should be provided.");
  }
  const field = given[0];
  if (field !== "input_embeds") checkPrompt(field, body[field], refuse);
  if (typeof body.stream !== "boolean" && body.stream !== undefined && body.stream !== null) {
    throw refuse("stream", "Invalid 'stream': expected a boolean");
  }
  checkSamplingParams(body.sampling_params, refuse);
  return {
    endpoint,
    model: model ?? "",
    stream: body.stream === true,
    body,
    prompt: field === "input_embeds"
      ? { kind: "opaque", chars: bytes.byteLength }
      : completionPrompt(body[field] as string | string[] | number[] | number[][]),
  };
}

const PROMPT_FIELDS = ["text", "input_ids", "input_embeds"] as const;

type Refuse = (param: string, message: string) => InvalidRequestError;

function checkPrompt(field: "text" | "input_ids", value: unknown, refuse: Refuse): void {
  const textual = typeof value === "string" ||
    (Array.isArray(value) && typeof value[0] === "string");
  if (field === "text" && !textual) {
    throw refuse("text", "Invalid 'text': must be a string or a non-empty array of strings");
  }
  if (field === "input_ids" && textual) {
    throw refuse("input_ids", "Invalid 'input_ids': must be token ids or arrays of token ids");
  }
  const problem = promptProblem(value);
  if (!problem) return;
  const param = quoted(formatPath([field, ...problem.path]));
  throw refuse(param, `Invalid '${param}': ${problem.message}`);
}

/** `sampling_params`: an object, or one per prompt; `n` (parallel samples) a positive integer. */
function checkSamplingParams(value: unknown, refuse: Refuse): void {
  if (value === undefined || value === null) return;
  const list = Array.isArray(value) ? value : [value];
  for (const [i, params] of list.entries()) {
    const at = Array.isArray(value) ? `sampling_params[${i}]` : "sampling_params";
    if (typeof params !== "object" || params === null || Array.isArray(params)) {
      throw refuse(at, `Invalid '${at}': expected an object`);
    }
    const n = (params as Record<string, unknown>).n;
    if (n !== undefined && n !== null && !(Number.isInteger(n) && (n as number) >= 1)) {
      throw refuse(`${at}.n`, `Invalid '${at}.n': expected an integer >= 1`);
    }
  }
}

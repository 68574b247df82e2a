import { z } from "zod";
import { formatPath } from "../config/load.ts";
import type { ChatMessage } from "../tokenize/types.ts";
import { HttpError, quoted } from "./errors.ts";
import { sharedTextPrefix, sharedTokenPrefix } from "./batch_prompt.ts";
import type { Endpoint } from "./endpoints.ts";
import { MAX_JSON_DEPTH, nestsDeeperThan } from "./json_depth.ts";

/**
 * The fields of OpenAI request bodies the router reads or type-checks. Everything else passes
 * through to the engine untouched (the proxy forwards the client's original bytes), so unknown
 * fields are kept.
 *
 * Arrays and maps a client controls the length of (prompt, messages, stop, logit_bias ...) are
 * checked by plain loops that stop at the first problem and never copy the value: zod's z.array,
 * z.record and z.union record an issue (and allocate a result) per element, and a 32 MiB body holds
 * 16.7 M token ids, enough to exhaust the heap.
 */

const MAX_TOKEN_ID = 0x7fffffff;
const PROMPT_FORMS =
  "must be a string, an array of strings, an array of token ids, or an array of token-id arrays";

/** A problem found by a plain check: where inside the field, and why. */
export interface Problem {
  path: (string | number)[];
  message: string;
}

const WRONG_FORM: Problem = { path: [], message: PROMPT_FORMS };

/** Takes the value as it is (no copy) and lets `check` report problems through `ctx`. */
function checked<T>(check: (value: unknown, ctx: z.RefinementCtx) => void) {
  return z.custom<T>().superRefine(check);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Token ids: integers in [0, 2^31-1]. A wrong type anywhere (reported for the whole prompt, as it
 * fits none of the forms) outranks an id out of range (reported at its index).
 */
function tokenIdsProblem(ids: unknown[], at: number[]): Problem | undefined {
  let found: Problem | undefined;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (typeof id !== "number" || !Number.isInteger(id)) return WRONG_FORM;
    if (found === undefined && (id < 0 || id > MAX_TOKEN_ID)) {
      found = {
        path: [...at, i],
        message: id < 0
          ? "Too small: expected number to be >=0"
          : `Too big: expected number to be <=${MAX_TOKEN_ID}`,
      };
    }
  }
  return found;
}

/** Which of the four forms a prompt array takes is decided by its first element. */
function promptArrayProblem(prompt: unknown[]): Problem | undefined {
  const first = prompt[0];
  if (typeof first === "string") {
    for (let i = 1; i < prompt.length; i++) {
      if (typeof prompt[i] !== "string") return WRONG_FORM;
    }
    return undefined;
  }
  if (typeof first === "number") return tokenIdsProblem(prompt, []);
  if (!Array.isArray(first)) return WRONG_FORM;
  let found: Problem | undefined;
  for (let i = 0; i < prompt.length; i++) {
    const ids = prompt[i];
    if (!Array.isArray(ids)) return WRONG_FORM;
    const problem = ids.length === 0
      ? { path: [i], message: "Too small: expected array to have >=1 items" }
      : tokenIdsProblem(ids, [i]);
    if (problem === WRONG_FORM) return WRONG_FORM;
    found ??= problem;
  }
  return found;
}

type Prompt = string | string[] | number[] | number[][];

/** What is wrong with a prompt (a string, strings, token ids or lists of them), if anything. */
export function promptProblem(value: unknown): Problem | undefined {
  if (typeof value === "string") return undefined;
  return Array.isArray(value) && value.length > 0 ? promptArrayProblem(value) : WRONG_FORM;
}

const prompt = checked<Prompt>((value, ctx) => {
  const problem = promptProblem(value);
  // A fresh path: zod prefixes issue paths in place, and WRONG_FORM is shared.
  if (problem) ctx.addIssue({ code: "custom", path: [...problem.path], message: problem.message });
});

/** An array of anything (its elements are the engine's business). */
const anyArray = checked<unknown[]>((value, ctx) => {
  if (!Array.isArray(value)) {
    ctx.addIssue({ code: "invalid_type", expected: "array", input: value });
  }
});

/** An object of anything, keyed by strings. */
const anyRecord = checked<Record<string, unknown>>((value, ctx) => {
  if (!isRecord(value)) ctx.addIssue({ code: "invalid_type", expected: "record", input: value });
});

/** `stop`: one stop sequence or several. */
const stop = checked<string | string[]>((value, ctx) => {
  if (typeof value === "string") return;
  if (!Array.isArray(value)) {
    ctx.addIssue({ code: "custom", message: "must be a string or an array of strings" });
    return;
  }
  for (let i = 0; i < value.length; i++) {
    if (typeof value[i] !== "string") {
      ctx.addIssue({ code: "invalid_type", expected: "string", input: value[i], path: [i] });
      return;
    }
  }
});

/** `logit_bias`: token id (as a string key) to a bias. */
const logitBias = checked<Record<string, number>>((value, ctx) => {
  if (!isRecord(value)) {
    ctx.addIssue({ code: "invalid_type", expected: "record", input: value });
    return;
  }
  for (const key in value) {
    if (typeof value[key] !== "number") {
      ctx.addIssue({ code: "invalid_type", expected: "number", input: value[key], path: [key] });
      return;
    }
  }
});

/** Seeds are integers, whatever their size (engines take 64-bit seeds). */
const seed = z.number().refine(Number.isInteger, "Invalid input: expected int, received number");

const common = {
  model: z.string().min(1, "must not be empty"),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  max_tokens: z.int().min(0).nullish(),
  n: z.int().min(1).nullish(),
  user: z.string().nullish(),
  cache_salt: z.string().nullish(),
  // OpenAI's sampling parameters, checked by type only: their ranges are the engine's to judge.
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  presence_penalty: z.number().nullish(),
  frequency_penalty: z.number().nullish(),
  seed: seed.nullish(),
  stop: stop.nullish(),
  logit_bias: logitBias.nullish(),
};

export const CompletionRequestSchema = z.looseObject({
  ...common,
  prompt,
  /** Completions count log probabilities; chat turns them on with a boolean. */
  logprobs: z.int().nullish(),
  best_of: z.int().nullish(),
  echo: z.boolean().nullish(),
  suffix: z.string().nullish(),
});

const message = z.looseObject({
  role: z.string().min(1),
  content: z.unknown().optional(),
});

/** Messages are checked one by one without copies; zod explains only the first bad one. */
const messages = checked<z.infer<typeof message>[]>((value, ctx) => {
  if (!Array.isArray(value)) {
    ctx.addIssue({ code: "invalid_type", expected: "array", input: value });
    return;
  }
  if (value.length === 0) {
    ctx.addIssue({ code: "custom", message: "must contain at least one message" });
    return;
  }
  for (let i = 0; i < value.length; i++) {
    const item = value[i];
    if (isRecord(item) && typeof item.role === "string" && item.role !== "") continue;
    const result = message.safeParse(item);
    if (result.success) continue;
    for (const issue of result.error.issues) ctx.addIssue({ ...issue, path: [i, ...issue.path] });
    return;
  }
});

export const ChatRequestSchema = z.looseObject({
  ...common,
  messages,
  tools: anyArray.nullish(),
  documents: anyArray.nullish(),
  chat_template_kwargs: anyRecord.nullish(),
  max_completion_tokens: z.int().min(0).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.int().nullish(),
});

export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;
export type ChatRequest = z.infer<typeof ChatRequestSchema>;

/** What the dispatcher needs to know of one request, whichever endpoint it came through. */
/**
 * A completions batch (`extraPromptCount` > 0) has its prompts' shared prefix as `text` or
 * `tokens` (src/openai/batch_prompt.ts), and in `batchSize` the characters (text) or token ids
 * of all its prompts together, so that its load counts every prompt.
 */
export type PromptInput =
  | { kind: "text"; text: string; extraPromptCount: number; batchSize?: number }
  /** A body the router reads no prompt from (pooling, utilities): `chars` is its size. */
  | { kind: "opaque"; chars: number }
  | { kind: "tokens"; tokens: number[]; extraPromptCount: number; batchSize?: number }
  | {
    kind: "chat";
    messages: ChatMessage[];
    tools?: unknown[];
    documents?: unknown[];
    chatTemplateKwargs?: Record<string, unknown>;
  };

export interface ParsedRequest {
  endpoint: Endpoint;
  model: string;
  stream: boolean;
  prompt: PromptInput;
  cacheSalt?: string;
  user?: string;
  /** The decoded JSON, for fields later stages read (A/B keys, P/D flows). */
  body: Record<string, unknown>;
  /** A Responses request continuing a stored response: only its engine can take it. */
  previousResponseId?: string;
}

/**
 * A body that parsed as JSON but is refused (400: does not validate; 413: a prompt over the
 * model's size limit); carries the `model` it names (when it names one), so that the refusal is
 * counted under that model rather than as "unknown".
 */
export class InvalidRequestError extends HttpError {
  constructor(
    message: string,
    param: string,
    code: string,
    readonly model?: string,
    status = 400,
  ) {
    super(status, message, { param, code });
    this.name = "InvalidRequestError";
  }
}

/** Parses raw body bytes; throws HttpError(400) naming the field at fault. */
export function parseOpenAIRequest(
  endpoint: "completions" | "chat",
  bytes: Uint8Array,
): ParsedRequest {
  const body = validated(endpoint, parseJsonObject(bytes));
  return {
    endpoint,
    model: body.model as string,
    stream: body.stream === true,
    cacheSalt: (body.cache_salt as string | null | undefined) ?? undefined,
    user: (body.user as string | null | undefined) ?? undefined,
    body,
    prompt: endpoint === "chat"
      ? chatPrompt(body as ChatRequest)
      : completionPrompt((body as CompletionRequest).prompt),
  };
}

/** The body as a JSON object, or a 400 in OpenAI's shape (too deep, not JSON, not an object). */
export function parseJsonObject(bytes: Uint8Array): Record<string, unknown> {
  const text = new TextDecoder().decode(bytes);
  if (nestsDeeperThan(text)) {
    throw new HttpError(
      400,
      `Request body nests deeper than ${MAX_JSON_DEPTH} levels of arrays and objects.`,
      { code: "invalid_json" },
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new HttpError(400, `Request body is not valid JSON: ${(error as Error).message}`, {
      code: "invalid_json",
    });
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    throw new HttpError(400, "Request body must be a JSON object", { code: "invalid_json" });
  }
  return json as Record<string, unknown>;
}

/** The body checked against its endpoint's schema; the first problem becomes the 400. */
function validated(
  endpoint: "completions" | "chat",
  json: Record<string, unknown>,
): Record<string, unknown> {
  const schema = endpoint === "chat" ? ChatRequestSchema : CompletionRequestSchema;
  const result = schema.safeParse(json);
  if (result.success) return result.data as Record<string, unknown>;
  const issue = result.error.issues[0];
  const param = quoted(formatPath(issue.path));
  const missing = issue.code === "invalid_type" && json[String(issue.path[0])] === undefined &&
    issue.path.length === 1;
  throw new InvalidRequestError(
    missing ? `Missing required parameter: '${param}'` : `Invalid '${param}': ${issue.message}`,
    param,
    missing ? "missing_required_parameter" : "invalid_value",
    typeof json.model === "string" ? json.model : undefined,
  );
}

function chatPrompt(chat: ChatRequest): PromptInput {
  return {
    kind: "chat",
    messages: chat.messages as ChatMessage[],
    tools: chat.tools ?? undefined,
    documents: chat.documents ?? undefined,
    chatTemplateKwargs: chat.chat_template_kwargs ?? undefined,
  };
}

/** A batch of prompts is routed by the prefix they share; each adds its prefill work. */
export function completionPrompt(prompt: CompletionRequest["prompt"]): PromptInput {
  if (typeof prompt === "string") return { kind: "text", text: prompt, extraPromptCount: 0 };
  if (typeof prompt[0] === "number") {
    return { kind: "tokens", tokens: prompt as number[], extraPromptCount: 0 };
  }
  if (prompt.length === 1) return completionPrompt(prompt[0] as string | number[]);
  if (typeof prompt[0] === "string") {
    const texts = prompt as string[];
    return {
      kind: "text",
      text: sharedTextPrefix(texts),
      extraPromptCount: texts.length - 1,
      batchSize: texts.reduce((sum, text) => sum + text.length, 0),
    };
  }
  const lists = prompt as number[][];
  return {
    kind: "tokens",
    tokens: sharedTokenPrefix(lists),
    extraPromptCount: lists.length - 1,
    batchSize: lists.reduce((sum, ids) => sum + ids.length, 0),
  };
}

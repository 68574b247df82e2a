/**
 * The fake engine's pooling and utility routes, answered and refused as vLLM's OpenAI server does
 * (vllm/entrypoints/serve/tokenize, vllm/entrypoints/pooling in vLLM 0.32): which routes a model
 * serves follows its runner (a generative model has no pooling routes: FastAPI's 404), bodies
 * missing their required field get the engine's 400, and answers carry the fields clients parse.
 * Token ids are made up (about 4 characters a token), embeddings are deterministic.
 */
import { AUDIO_PATHS } from "./fake_audio_routes.ts";

export type FakeRunner = "generate" | "embed" | "classify" | "transcription";

const ALWAYS = ["/tokenize", "/detokenize"];
const SCORING = ["/score", "/v1/score", "/rerank", "/v1/rerank", "/v2/rerank"];
const ROUTES: Record<FakeRunner, readonly string[]> = {
  generate: [
    ...ALWAYS,
    "/v1/completions",
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/responses",
    // SGLang's native route (the fake engine serves it with the sglang flavour only).
    "/generate",
  ],
  embed: [...ALWAYS, "/v1/embeddings", "/pooling", ...SCORING],
  classify: [...ALWAYS, "/classify", "/pooling"],
  // A speech model (Whisper): its audio routes (fake_audio_routes.ts).
  transcription: [...ALWAYS, ...AUDIO_PATHS],
};

const UTILITY_PATHS = new Set([
  ...ROUTES.embed,
  ...ROUTES.classify,
  "/v1/messages/count_tokens",
]);

/** Whether a model of `runner` has the POST route `path` at all. */
export function servesRoute(runner: FakeRunner, path: string): boolean {
  return ROUTES[runner].includes(path);
}

export function isUtilityPath(path: string): boolean {
  return UTILITY_PATHS.has(path);
}

export interface UtilityAnswer {
  status: number;
  body: unknown;
  /** Prompt tokens the request carried (for the engine's records). */
  promptTokens: number;
}

const MAX_MODEL_LEN = 40_960;

export function utilityAnswer(
  path: string,
  body: Record<string, unknown>,
  model: string,
): UtilityAnswer {
  switch (path) {
    case "/tokenize":
      return tokenize(body);
    case "/detokenize":
      return detokenize(body);
    case "/v1/messages/count_tokens":
      return countTokens(body);
    case "/v1/embeddings":
      return embeddings(body, model);
    case "/pooling":
      return pooling(body, model);
    case "/classify":
      return classify(body, model);
    case "/rerank":
    case "/v1/rerank":
    case "/v2/rerank":
      return rerank(body, model);
    default:
      return score(body, model);
  }
}

function tokenize(body: Record<string, unknown>): UtilityAnswer {
  let text: string;
  if (typeof body.prompt === "string") text = body.prompt;
  else if (Array.isArray(body.messages)) text = JSON.stringify(body.messages);
  else return missing("prompt");
  const tokens = fakeIds(text);
  return ok({ count: tokens.length, max_model_len: MAX_MODEL_LEN, tokens, token_strs: null }, 0);
}

/** Anthropic's count of a Messages body's prompt. */
function countTokens(body: Record<string, unknown>): UtilityAnswer {
  if (!Array.isArray(body.messages)) return missing("messages");
  const text = JSON.stringify([body.system ?? "", body.messages, body.tools ?? []]);
  return ok({ input_tokens: fakeIds(text).length }, 0);
}

function detokenize(body: Record<string, unknown>): UtilityAnswer {
  const tokens = body.tokens;
  if (!Array.isArray(tokens)) return missing("tokens");
  if (!tokens.every((t) => Number.isInteger(t) && t >= 0)) {
    return refused("tokens: each must be an integer >= 0", "tokens");
  }
  return ok({ prompt: tokens.map((t) => `<${t}>`).join("") }, tokens.length);
}

function embeddings(body: Record<string, unknown>, model: string): UtilityAnswer {
  const inputs = inputList(body.input);
  if (!inputs) return body.input === undefined ? missing("input") : badInput();
  const data = inputs.map((input, index) => ({
    index,
    object: "embedding",
    embedding: fakeVector(input),
  }));
  const tokens = sumTokens(inputs);
  return ok({
    id: `embd-${crypto.randomUUID()}`,
    object: "list",
    created: Math.floor(Date.now() / 1000),
    model,
    data,
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0 },
  }, tokens);
}

function pooling(body: Record<string, unknown>, model: string): UtilityAnswer {
  const inputs = inputList(body.input);
  if (!inputs) return body.input === undefined ? missing("input") : badInput();
  const tokens = sumTokens(inputs);
  return ok({
    id: `pool-${crypto.randomUUID()}`,
    object: "list",
    created: Math.floor(Date.now() / 1000),
    model,
    data: inputs.map((input, index) => ({ index, object: "pooling", data: fakeVector(input) })),
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0 },
  }, tokens);
}

function classify(body: Record<string, unknown>, model: string): UtilityAnswer {
  const inputs = inputList(body.input);
  if (!inputs) return body.input === undefined ? missing("input") : badInput();
  const tokens = sumTokens(inputs);
  return ok({
    id: `classify-${crypto.randomUUID()}`,
    object: "list",
    created: Math.floor(Date.now() / 1000),
    model,
    data: inputs.map((input, index) => {
      const p = (fakeIds(String(input))[0] ?? 0) % 2 === 0 ? 0.75 : 0.25;
      return { index, label: p > 0.5 ? "positive" : "negative", probs: [p, 1 - p], num_classes: 2 };
    }),
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0 },
  }, tokens);
}

/** vLLM takes three spellings of the two sides of a score request. */
function score(body: Record<string, unknown>, model: string): UtilityAnswer {
  const pair = [["text_1", "text_2"], ["queries", "documents"], ["data_1", "data_2"]]
    .find(([a, b]) => body[a] !== undefined && body[b] !== undefined);
  if (!pair) return missing("text_1");
  const left = ([] as unknown[]).concat(body[pair[0]]);
  const right = ([] as unknown[]).concat(body[pair[1]]);
  const tokens = sumTokens([...left, ...right]);
  return ok({
    id: `score-${crypto.randomUUID()}`,
    object: "list",
    created: Math.floor(Date.now() / 1000),
    model,
    data: right.map((doc, index) => ({ index, object: "score", score: similarity(left[0], doc) })),
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0 },
  }, tokens);
}

function rerank(body: Record<string, unknown>, model: string): UtilityAnswer {
  if (body.query === undefined) return missing("query");
  if (body.documents === undefined) return missing("documents");
  const documents = ([] as unknown[]).concat(body.documents);
  const tokens = sumTokens([body.query, ...documents]);
  const results = documents
    .map((doc, index) => ({
      index,
      document: { text: typeof doc === "string" ? doc : null },
      relevance_score: similarity(body.query, doc),
    }))
    .sort((a, b) => b.relevance_score - a.relevance_score);
  const topN = Number(body.top_n ?? 0);
  return ok({
    id: `rerank-${crypto.randomUUID()}`,
    model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
    results: topN > 0 ? results.slice(0, topN) : results,
  }, tokens);
}

/** `input` as vLLM takes it: a string, strings, token ids, or lists of token ids. */
function inputList(input: unknown): unknown[] | undefined {
  if (typeof input === "string") return [input];
  if (!Array.isArray(input) || input.length === 0) return undefined;
  if (typeof input[0] === "number") return [input];
  return input;
}

function fakeIds(text: string): number[] {
  const ids: number[] = [];
  for (let i = 0; i < text.length; i += 4) {
    let id = 7;
    for (let j = i; j < Math.min(text.length, i + 4); j++) {
      id = (id * 31 + text.charCodeAt(j)) % 151_000;
    }
    ids.push(id);
  }
  return ids;
}

function tokensOf(input: unknown): number {
  if (typeof input === "string") return fakeIds(input).length;
  if (Array.isArray(input)) return input.length;
  return fakeIds(JSON.stringify(input ?? "")).length;
}

function sumTokens(inputs: unknown[]): number {
  return inputs.reduce<number>((sum, input) => sum + tokensOf(input), 0);
}

function fakeVector(input: unknown): number[] {
  const ids = typeof input === "string" ? fakeIds(input) : fakeIds(JSON.stringify(input));
  return Array.from({ length: 8 }, (_, i) => ((ids[i % ids.length] ?? i) % 1000) / 1000);
}

function similarity(a: unknown, b: unknown): number {
  const x = fakeVector(a);
  const y = fakeVector(b);
  return x.reduce((sum, v, i) => sum + v * y[i], 0) / 8;
}

function ok(body: unknown, promptTokens: number): UtilityAnswer {
  return { status: 200, body, promptTokens };
}

function missing(field: string): UtilityAnswer {
  return refused(`Field required: ${field}`, field);
}

function badInput(): UtilityAnswer {
  return refused("input: must be a string, strings, token ids or lists of token ids", "input");
}

function refused(message: string, param: string): UtilityAnswer {
  return {
    status: 400,
    body: { error: { message, type: "BadRequestError", param, code: 400 } },
    promptTokens: 0,
  };
}

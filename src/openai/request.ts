import { z } from "zod";
import { formatPath } from "../config/load.ts";
import type { ChatMessage } from "../tokenize/types.ts";
import { HttpError } from "./errors.ts";

/**
 * The fields of OpenAI request bodies the router reads. Everything else passes through to the
 * engine untouched (the proxy forwards the client's original bytes), so unknown fields are kept.
 */

const tokenIds = z.array(z.int().min(0).max(0x7fffffff));
const common = {
  model: z.string().min(1, "must not be empty"),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  max_tokens: z.int().min(0).nullish(),
  n: z.int().min(1).nullish(),
  user: z.string().nullish(),
  cache_salt: z.string().nullish(),
};

export const CompletionRequestSchema = z.looseObject({
  ...common,
  prompt: z.union([
    z.string(),
    z.array(z.string()).min(1),
    tokenIds.min(1),
    z.array(tokenIds.min(1)).min(1),
  ], {
    error:
      "must be a string, an array of strings, an array of token ids, or an array of token-id arrays",
  }),
});

const message = z.looseObject({
  role: z.string().min(1),
  content: z.unknown().optional(),
});

export const ChatRequestSchema = z.looseObject({
  ...common,
  messages: z.array(message).min(1, "must contain at least one message"),
  tools: z.array(z.unknown()).nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  max_completion_tokens: z.int().min(0).nullish(),
});

export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;
export type ChatRequest = z.infer<typeof ChatRequestSchema>;

/** What the dispatcher needs to know of one request, whichever endpoint it came through. */
export type PromptInput =
  | { kind: "text"; text: string; extraPromptCount: number }
  | { kind: "tokens"; tokens: number[]; extraPromptCount: number }
  | {
    kind: "chat";
    messages: ChatMessage[];
    tools?: unknown[];
    chatTemplateKwargs?: Record<string, unknown>;
  };

export interface ParsedRequest {
  endpoint: "completions" | "chat";
  model: string;
  stream: boolean;
  prompt: PromptInput;
  cacheSalt?: string;
  user?: string;
  /** The decoded JSON, for fields later stages read (A/B keys, P/D flows). */
  body: Record<string, unknown>;
}

/** Parses raw body bytes; throws HttpError(400) naming the field at fault. */
export function parseOpenAIRequest(
  endpoint: "completions" | "chat",
  bytes: Uint8Array,
): ParsedRequest {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(bytes));
  } catch (error) {
    throw new HttpError(400, `Request body is not valid JSON: ${(error as Error).message}`, {
      code: "invalid_json",
    });
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    throw new HttpError(400, "Request body must be a JSON object", { code: "invalid_json" });
  }
  const schema = endpoint === "chat" ? ChatRequestSchema : CompletionRequestSchema;
  const result = schema.safeParse(json);
  if (!result.success) {
    const issue = result.error.issues[0];
    const param = formatPath(issue.path);
    const missing = issue.code === "invalid_type" &&
      (json as Record<string, unknown>)[String(issue.path[0])] === undefined &&
      issue.path.length === 1;
    throw new HttpError(
      400,
      missing ? `Missing required parameter: '${param}'` : `Invalid '${param}': ${issue.message}`,
      { param, code: missing ? "missing_required_parameter" : "invalid_value" },
    );
  }
  const body = result.data as Record<string, unknown>;
  const base = {
    endpoint,
    model: body.model as string,
    stream: body.stream === true,
    cacheSalt: (body.cache_salt as string | null | undefined) ?? undefined,
    user: (body.user as string | null | undefined) ?? undefined,
    body,
  };
  if (endpoint === "chat") {
    const chat = result.data as ChatRequest;
    return {
      ...base,
      prompt: {
        kind: "chat",
        messages: chat.messages as ChatMessage[],
        tools: chat.tools ?? undefined,
        chatTemplateKwargs: chat.chat_template_kwargs ?? undefined,
      },
    };
  }
  const prompt = (result.data as CompletionRequest).prompt;
  // A batch of prompts is routed by its first prompt; the rest only add prefill work.
  if (typeof prompt === "string") {
    return { ...base, prompt: { kind: "text", text: prompt, extraPromptCount: 0 } };
  }
  if (typeof prompt[0] === "number") {
    return { ...base, prompt: { kind: "tokens", tokens: prompt as number[], extraPromptCount: 0 } };
  }
  if (typeof prompt[0] === "string") {
    return {
      ...base,
      prompt: { kind: "text", text: prompt[0], extraPromptCount: prompt.length - 1 },
    };
  }
  const batches = prompt as number[][];
  return {
    ...base,
    prompt: { kind: "tokens", tokens: batches[0], extraPromptCount: batches.length - 1 },
  };
}

import type { ModelConfig } from "../config/schema.ts";
import { HttpError } from "../openai/errors.ts";
import type { PromptInput } from "../openai/request.ts";
import { chatInputSize } from "../tokenize/input_size.ts";

/** A token id weighs what its text usually would: ~4 characters. */
export const CHARS_PER_TOKEN_ID = 4;

/**
 * The characters of text the router would tokenize for `prompt`: a chat counts every template
 * input (src/tokenize/input_size.ts), a token id CHARS_PER_TOKEN_ID, and a batch all its prompts.
 * Counting stops just past `stopAbove`.
 */
export function promptChars(prompt: PromptInput, stopAbove = Infinity): number {
  if (prompt.kind === "opaque") return prompt.chars;
  if (prompt.kind === "text") return prompt.batchSize ?? prompt.text.length;
  if (prompt.kind === "tokens") {
    return (prompt.batchSize ?? prompt.tokens.length) * CHARS_PER_TOKEN_ID;
  }
  return chatInputSize(prompt.messages, prompt, stopAbove);
}

/**
 * 413 before any rendering or tokenizing when the prompt holds more text than `limit` (the
 * model's `limits.maxPromptChars`; tools, tool results, documents and template kwargs included).
 */
export function refuseOversizedPrompt(limit: number, prompt: PromptInput): void {
  const chars = promptChars(prompt, limit);
  if (chars <= limit) return;
  const what = prompt.kind === "chat"
    ? `more than ${limit} characters`
    : prompt.kind === "tokens"
    ? `${chars / CHARS_PER_TOKEN_ID} token ids (${CHARS_PER_TOKEN_ID} characters each)`
    : `${chars} characters`;
  throw new HttpError(
    413,
    `The prompt holds ${what}; this model accepts at most ${limit} characters ` +
      `(models[].limits.maxPromptChars, which counts messages, tools, documents and ` +
      `chat_template_kwargs).`,
    { param: paramOf(prompt), code: "prompt_too_large" },
  );
}

/** 400 in OpenAI's words when the tokenized prompt exceeds the model's context. */
export function refuseOverlongPrompt(
  model: ModelConfig,
  tokenized: { tokens?: readonly number[] },
  prompt: PromptInput,
): void {
  const limit = model.limits.maxPromptTokens;
  const tokens = tokenized.tokens?.length;
  if (limit === undefined || tokens === undefined || tokens <= limit) return;
  throw new HttpError(
    400,
    `This model's maximum context length is ${limit} tokens. However, your prompt resulted in ` +
      `${tokens} tokens. Please reduce the length of the prompt.`,
    { param: paramOf(prompt), code: "context_length_exceeded" },
  );
}

function paramOf(prompt: PromptInput): string {
  return prompt.kind === "chat" ? "messages" : prompt.kind === "opaque" ? "input" : "prompt";
}

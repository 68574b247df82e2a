import type { ModelConfig } from "../config/schema.ts";
import { HttpError } from "../openai/errors.ts";
import type { PromptInput } from "../openai/request.ts";
import { chatInputSize } from "../tokenize/input_size.ts";

/**
 * The characters of text the router would tokenize for `prompt`: a chat counts every template
 * input (src/tokenize/input_size.ts), token ids count one each, and a batch counts its first
 * prompt times its size, as its load is estimated. Counting stops just past `stopAbove`.
 */
export function promptChars(prompt: PromptInput, stopAbove = Infinity): number {
  if (prompt.kind === "text") return prompt.text.length * (1 + prompt.extraPromptCount);
  if (prompt.kind === "tokens") return prompt.tokens.length * (1 + prompt.extraPromptCount);
  return chatInputSize(prompt.messages, prompt, stopAbove);
}

/**
 * 413 before any rendering or tokenizing when the prompt holds more text than the model's limit
 * (tools, tool results, documents and template kwargs included).
 */
export function refuseOversizedPrompt(model: ModelConfig, prompt: PromptInput): void {
  const limit = model.limits.maxPromptChars;
  const chars = promptChars(prompt, limit);
  if (chars <= limit) return;
  const exact = prompt.kind !== "chat";
  throw new HttpError(
    413,
    `The prompt holds ${exact ? "" : "more than "}${exact ? chars : limit} characters; this ` +
      `model accepts at most ${limit} (models[].limits.maxPromptChars, which counts messages, ` +
      `tools, documents and chat_template_kwargs).`,
    { param: paramOf(prompt), code: "prompt_too_large" },
  );
}

/** 400 in OpenAI's words when the counted prompt exceeds the model's context. */
export function refuseOverlongPrompt(
  model: ModelConfig,
  counted: { tokens?: readonly number[] },
  prompt: PromptInput,
): void {
  const limit = model.limits.maxPromptTokens;
  const tokens = counted.tokens?.length;
  if (limit === undefined || tokens === undefined || tokens <= limit) return;
  throw new HttpError(
    400,
    `This model's maximum context length is ${limit} tokens. However, your prompt resulted in ` +
      `${tokens} tokens. Please reduce the length of the prompt.`,
    { param: paramOf(prompt), code: "context_length_exceeded" },
  );
}

function paramOf(prompt: PromptInput): string {
  return prompt.kind === "chat" ? "messages" : "prompt";
}

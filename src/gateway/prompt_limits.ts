import type { ModelConfig } from "../config/schema.ts";
import { HttpError } from "../openai/errors.ts";
import { promptChars } from "../openai/prompt_size.ts";
import type { PromptInput } from "../openai/request.ts";

/** 413 before any tokenizing when the prompt holds more text than the model's limit. */
export function refuseOversizedPrompt(model: ModelConfig, prompt: PromptInput): void {
  const chars = promptChars(prompt);
  const limit = model.limits.maxPromptChars;
  if (chars <= limit) return;
  throw new HttpError(
    413,
    `The prompt holds ${chars} characters; this model accepts at most ${limit} ` +
      `(models[].limits.maxPromptChars).`,
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

import type { PromptInput } from "./request.ts";

/**
 * The characters of text the router would tokenize for `prompt` (token ids count one each); a
 * batch counts as its first prompt times its size, as its load is estimated. Images and other
 * non-text parts are the engine's business: not counted.
 */
export function promptChars(prompt: PromptInput): number {
  if (prompt.kind === "text") return prompt.text.length * (1 + prompt.extraPromptCount);
  if (prompt.kind === "tokens") return prompt.tokens.length * (1 + prompt.extraPromptCount);
  let chars = 0;
  for (const message of prompt.messages) chars += textChars(message.content);
  return chars;
}

function textChars(content: unknown): number {
  if (typeof content === "string") return content.length;
  if (!Array.isArray(content)) return 0;
  let chars = 0;
  for (const part of content) {
    const text = (part as { text?: unknown } | null)?.text;
    if (typeof text === "string") chars += text.length;
  }
  return chars;
}

/**
 * How much text a prompt hands the tokenizer: every string a chat template may render (message
 * contents and every other message field, tool definitions, tool calls and results, documents,
 * template kwargs), keys included, and one character per number, boolean or null. The cap on a
 * request (`limits.maxPromptChars`) and the choice between tokenizing inline and in a worker both
 * read it, so a 20 MB tool description counts as what it is.
 */
import type { ChatEncodeOptions, ChatMessage } from "./types.ts";

/**
 * Characters of `values`, walked without recursion (a 100,000-deep array is as cheap as a flat
 * one); the walk stops once the count passes `stopAbove`, so its cost is bounded by the cap.
 */
export function jsonTextSize(values: readonly unknown[], stopAbove = Infinity): number {
  let chars = 0;
  const stack: unknown[] = [...values];
  while (stack.length > 0 && chars <= stopAbove) {
    const value = stack.pop();
    if (typeof value === "string") chars += value.length;
    else if (Array.isArray(value)) {
      chars += 1;
      for (let i = 0; i < value.length; i++) stack.push(value[i]);
    } else if (value !== null && typeof value === "object") {
      chars += 1;
      for (const key in value) {
        chars += key.length;
        stack.push((value as Record<string, unknown>)[key]);
      }
    } else if (value !== undefined) chars += 1;
  }
  return chars;
}

/** What rendering a chat would read: the messages and every template input besides them. */
export function chatInputSize(
  messages: readonly ChatMessage[],
  options: ChatEncodeOptions = {},
  stopAbove = Infinity,
): number {
  return jsonTextSize(
    [messages, options.tools, options.documents, options.chatTemplateKwargs],
    stopAbove,
  );
}

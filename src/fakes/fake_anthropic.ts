/**
 * The fake engine's answers on `/v1/messages` in Anthropic's shapes, as vLLM's
 * vllm/entrypoints/anthropic/serving.py writes them (vLLM 0.32): a `message` object, or the event
 * stream message_start, content_block_start, content_block_delta per token, content_block_stop,
 * message_delta (stop reason and output tokens), message_stop. Usage follows vLLM's
 * `_build_anthropic_usage`: `input_tokens` is the prompt less what the cache read.
 */

export interface AnthropicUsageInput {
  promptTokens: number;
  outputTokens: number;
  cachedTokens?: number;
}

export function anthropicUsage(usage: AnthropicUsageInput): Record<string, number> {
  const out: Record<string, number> = {
    input_tokens: Math.max(0, usage.promptTokens - (usage.cachedTokens ?? 0)),
    output_tokens: usage.outputTokens,
  };
  if (usage.cachedTokens !== undefined) out.cache_read_input_tokens = usage.cachedTokens;
  return out;
}

export function stopReason(finish: "length" | "stop"): string {
  return finish === "length" ? "max_tokens" : "end_turn";
}

export function anthropicMessage(
  id: string,
  model: string,
  text: string,
  finish: "length" | "stop",
  usage: AnthropicUsageInput,
): Record<string, unknown> {
  return {
    id,
    type: "message",
    role: "assistant",
    content: [{ type: "text", text }],
    model,
    stop_reason: stopReason(finish),
    stop_sequence: null,
    usage: anthropicUsage(usage),
  };
}

function event(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

/** The events before the first token's delta. */
export function anthropicStreamStart(
  id: string,
  model: string,
  usage: AnthropicUsageInput,
): string {
  const message = {
    id,
    type: "message",
    role: "assistant",
    content: [],
    model,
    stop_reason: null,
    stop_sequence: null,
    usage: anthropicUsage({ ...usage, outputTokens: 0 }),
  };
  return event("message_start", { message }) +
    event("content_block_start", { index: 0, content_block: { type: "text", text: "" } });
}

export function anthropicStreamDelta(text: string): string {
  return event("content_block_delta", { index: 0, delta: { type: "text_delta", text } });
}

export function anthropicStreamEnd(finish: "length" | "stop", usage: AnthropicUsageInput): string {
  return event("content_block_stop", { index: 0 }) +
    event("message_delta", {
      delta: { stop_reason: stopReason(finish), stop_sequence: null },
      usage: anthropicUsage(usage),
    }) +
    event("message_stop", {});
}

/** vLLM's Anthropic error body: its OpenAI error type under Anthropic's envelope. */
export function anthropicEngineError(message: string, type: string): Record<string, unknown> {
  return { type: "error", error: { type, message } };
}

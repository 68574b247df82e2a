/**
 * Anthropic's Messages API as vLLM serves it (`POST /v1/messages`): the body is checked for what
 * vLLM requires, and rendered into the chat messages and tools vLLM builds from it
 * (vllm/entrypoints/anthropic/serving.py, `to_chat_completion_request`, vLLM 0.32), so the router
 * tokenizes the prompt the engine will prefill and routes it cache-aware like a chat. The body is
 * forwarded as received: the engine converts it itself.
 *
 * Inline system messages are merged into the leading system prompt, as vLLM does for chat
 * templates that need the system message first (Qwen's among them); under a template that takes
 * them inline the router's tokens then differ from the engine's past that point.
 */
import type { ChatMessage } from "../tokenize/types.ts";
import { InvalidRequestError, type ParsedRequest, parseJsonObject } from "./request.ts";

type Block = Record<string, unknown>;

/** Claude Code's per-request attribution header: vLLM drops it so that prefixes stay cached. */
const BILLING_HEADER = "x-anthropic-billing-header";

export function parseAnthropicMessages(
  endpoint: "messages",
  bytes: Uint8Array,
): ParsedRequest {
  const body = parseJsonObject(bytes);
  const model = typeof body.model === "string" ? body.model : undefined;
  const refuse = (param: string, message: string) =>
    new InvalidRequestError(message, param, "invalid_value", model);
  if (typeof body.model !== "string") throw refuse("model", "model: Field required (a string)");
  if (!Array.isArray(body.messages)) throw refuse("messages", "messages: Field required");
  if (!Number.isInteger(body.max_tokens)) {
    throw refuse("max_tokens", "max_tokens: Field required (an integer)");
  }
  for (let i = 0; i < body.messages.length; i++) {
    const message = body.messages[i];
    if (!isRecord(message) || !["user", "assistant", "system"].includes(message.role as string)) {
      throw refuse(`messages.${i}.role`, `messages.${i}.role: one of user, assistant, system`);
    }
    if (typeof message.content !== "string" && !Array.isArray(message.content)) {
      throw refuse(`messages.${i}.content`, `messages.${i}.content: a string or a list of blocks`);
    }
  }
  if (body.tools !== undefined && body.tools !== null && !Array.isArray(body.tools)) {
    throw refuse("tools", "tools: a list");
  }
  const { messages, tools } = anthropicToChat(body);
  return {
    endpoint,
    model: body.model,
    stream: body.stream === true,
    cacheSalt: typeof body.cache_salt === "string" ? body.cache_salt : undefined,
    body,
    prompt: {
      kind: "chat",
      messages,
      tools,
      chatTemplateKwargs: isRecord(body.chat_template_kwargs)
        ? body.chat_template_kwargs
        : undefined,
    },
  };
}

/** The chat messages and OpenAI-shaped tools vLLM makes of a Messages body. */
export function anthropicToChat(
  body: Record<string, unknown>,
): { messages: ChatMessage[]; tools?: unknown[] } {
  const messages: ChatMessage[] = [];
  const system = [...systemTexts(body.system), ...inlineSystemTexts(body.messages as Block[])];
  if (system.length > 0) messages.push({ role: "system", content: system.join("") });
  for (const message of body.messages as Block[]) {
    if (message.role === "system") continue; // merged above
    const converted: ChatMessage = { role: message.role as string };
    if (typeof message.content === "string") converted.content = message.content;
    else convertBlocks(message.content as Block[], converted, messages);
    if (!(message.role === "user" && !("content" in converted))) messages.push(converted);
  }
  return { messages, tools: convertTools(body.tools) };
}

function systemTexts(system: unknown): string[] {
  if (typeof system === "string") return system ? [system] : [];
  if (!Array.isArray(system)) return [];
  return system.flatMap((block: Block) =>
    block?.type === "text" && typeof block.text === "string" && block.text &&
      !block.text.startsWith(BILLING_HEADER)
      ? [block.text]
      : []
  );
}

function inlineSystemTexts(messages: Block[]): string[] {
  return messages.filter((m) => m.role === "system").flatMap((m) => {
    const text = typeof m.content === "string"
      ? (m.content.startsWith(BILLING_HEADER) ? "" : m.content)
      : systemTexts(m.content).join("");
    return text ? [text] : [];
  });
}

/** One message's blocks: text and images as content, tool uses as calls, tool results apart. */
function convertBlocks(blocks: Block[], converted: ChatMessage, messages: ChatMessage[]): void {
  const parts: Block[] = [];
  const toolCalls: Block[] = [];
  const reasoning: string[] = [];
  for (const block of blocks) {
    if (!isRecord(block)) continue;
    if (block.type === "text" && typeof block.text === "string" && block.text) {
      parts.push({ type: "text", text: block.text });
    } else if (block.type === "image" && isRecord(block.source)) {
      parts.push({ type: "image_url", image_url: { url: imageUrl(block.source) } });
    } else if (block.type === "thinking" && typeof block.thinking === "string") {
      reasoning.push(block.thinking);
    } else if (block.type === "tool_use") {
      toolCalls.push({
        id: block.id ?? `call_${Math.floor(Date.now() / 1000)}`,
        type: "function",
        // The engine parses arguments back before templating (src/tokenize/chat_messages.ts).
        function: { name: block.name ?? "", arguments: JSON.stringify(block.input ?? {}) },
      });
    } else if (block.type === "tool_result") {
      if (converted.role === "user") messages.push(...toolResultMessages(block));
      else parts.push({ type: "text", text: `Tool result: ${block.content ?? ""}` });
    }
  }
  if (reasoning.length > 0) converted.reasoning = reasoning.join("");
  if (toolCalls.length > 0) converted.tool_calls = toolCalls;
  if (parts.length === 1 && parts[0].type === "text") converted.content = parts[0].text;
  else if (parts.length > 0) converted.content = parts;
}

function toolResultMessages(block: Block): ChatMessage[] {
  let text = "";
  const images: string[] = [];
  if (typeof block.content === "string") text = block.content;
  else if (Array.isArray(block.content)) {
    const texts: string[] = [];
    for (const item of block.content) {
      if (!isRecord(item)) continue;
      if (item.type === "text") texts.push(typeof item.text === "string" ? item.text : "");
      if (item.type === "image" && isRecord(item.source)) images.push(imageUrl(item.source));
    }
    text = texts.join("\n");
  }
  const out: ChatMessage[] = [{
    role: "tool",
    tool_call_id: typeof block.tool_use_id === "string" ? block.tool_use_id : "",
    content: text,
  }];
  if (images.length > 0) {
    out.push({
      role: "user",
      content: images.map((url) => ({ type: "image_url", image_url: { url } })),
    });
  }
  return out;
}

function convertTools(tools: unknown): unknown[] | undefined {
  if (!Array.isArray(tools)) return undefined;
  return tools.map((tool: Block) => ({
    type: "function",
    function: {
      name: tool.name,
      description: tool.description ?? null,
      parameters: tool.input_schema,
      // vLLM's tool model keeps `strict` and drops `defer_loading` when the template sees them;
      // src/tokenize/chat_messages.ts fills the fields it declares.
      ...(tool.strict !== undefined && tool.strict !== null ? { strict: tool.strict } : {}),
    },
  }));
}

function imageUrl(source: Block): string {
  if (source.type === "url" && typeof source.url === "string") return source.url;
  return `data:${source.media_type ?? "image/jpeg"};base64,${source.data ?? ""}`;
}

function isRecord(value: unknown): value is Block {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

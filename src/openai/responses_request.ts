/**
 * OpenAI's Responses API as vLLM serves it (`POST /v1/responses`): `instructions` and `input` are
 * rendered into the chat messages vLLM builds from them (vllm/entrypoints/openai/responses/
 * utils.py, `construct_input_messages`, vLLM 0.32) so that the router tokenizes the prompt the
 * engine prefills and routes it cache-aware like a chat. A request continuing a stored response
 * (`previous_response_id`) is another matter: its prompt starts with a history only the engine
 * that stored it holds, so it goes there (the gateway's response homes) and is not tokenized.
 */
import type { ChatMessage } from "../tokenize/types.ts";
import { InvalidRequestError, type ParsedRequest, parseJsonObject } from "./request.ts";

type Item = Record<string, unknown>;

export function parseResponsesRequest(endpoint: "responses", bytes: Uint8Array): ParsedRequest {
  const body = parseJsonObject(bytes);
  const model = typeof body.model === "string" ? body.model : undefined;
  const refuse = (param: string, message: string) =>
    new InvalidRequestError(message, param, "invalid_value", model);
  if (typeof body.model !== "string") throw refuse("model", "model: Field required (a string)");
  if (typeof body.input !== "string" && !Array.isArray(body.input)) {
    throw refuse("input", "input: a string or a list of items");
  }
  const previous = body.previous_response_id;
  if (previous !== undefined && previous !== null && typeof previous !== "string") {
    throw refuse("previous_response_id", "previous_response_id: a string");
  }
  const parsed: ParsedRequest = {
    endpoint,
    model: body.model,
    stream: body.stream === true,
    cacheSalt: typeof body.cache_salt === "string" ? body.cache_salt : undefined,
    user: typeof body.user === "string" ? body.user : undefined,
    body,
    prompt: { kind: "opaque", chars: bytes.byteLength },
  };
  if (typeof previous === "string") return { ...parsed, previousResponseId: previous };
  const rendered = renderResponsesInput(body);
  return rendered ? { ...parsed, prompt: { kind: "chat", ...rendered } } : parsed;
}

/**
 * The chat vLLM makes of `instructions`, `input` and function `tools`; undefined for input items
 * the router does not render (built-in tools, encrypted reasoning): such a request goes by load.
 */
export function renderResponsesInput(
  body: Record<string, unknown>,
): { messages: ChatMessage[]; tools?: unknown[] } | undefined {
  const messages: ChatMessage[] = [];
  if (typeof body.instructions === "string" && body.instructions) {
    messages.push({ role: "system", content: body.instructions });
  }
  if (typeof body.input === "string") messages.push({ role: "user", content: body.input });
  else {
    for (const item of body.input as Item[]) {
      if (!isRecord(item) || !addItem(item, messages)) return undefined;
    }
  }
  return { messages, tools: functionTools(body.tools) };
}

/** One input item into `messages`; false for an item the router does not render. */
function addItem(item: Item, messages: ChatMessage[]): boolean {
  const previous = messages.at(-1);
  const assistant = previous?.role === "assistant" ? previous : undefined;
  const type = item.type ?? (typeof item.role === "string" ? "message" : undefined);
  if (type === "function_call") {
    const call = {
      id: item.call_id,
      type: "function",
      function: { name: item.name, arguments: item.arguments },
    };
    if (assistant && Array.isArray(assistant.tool_calls)) assistant.tool_calls.push(call);
    else if (assistant && assistant.tool_calls === undefined) assistant.tool_calls = [call];
    else messages.push({ role: "assistant", tool_calls: [call] });
    return true;
  }
  if (type === "function_call_output") {
    messages.push({ role: "tool", content: item.output, tool_call_id: item.call_id as string });
    return true;
  }
  if (type === "reasoning") {
    if (item.encrypted_content) return false;
    const parts = Array.isArray(item.content) && item.content.length ? item.content : item.summary;
    const text = Array.isArray(parts) && isRecord(parts[0]) ? parts[0].text : "";
    if (assistant && assistant.reasoning === undefined) assistant.reasoning = text;
    else messages.push({ role: "assistant", reasoning: text });
    return true;
  }
  if (type !== "message" || typeof item.role !== "string") return false;
  if (item.role === "assistant") {
    const content = item.content;
    const text = typeof content === "string"
      ? content
      : Array.isArray(content) && isRecord(content[0])
      ? content[0].text
      : undefined;
    if (text === undefined) return false;
    if (assistant && assistant.content === undefined) assistant.content = text;
    else messages.push({ role: "assistant", content: text });
    return true;
  }
  const { type: _type, id: _id, status: _status, ...message } = item;
  messages.push(message as ChatMessage);
  return true;
}

/** Flat Responses function tools as chat tools; undefined when there are none. */
function functionTools(tools: unknown): unknown[] | undefined {
  if (!Array.isArray(tools) || tools.length === 0) return undefined;
  return tools.filter((t) => isRecord(t) && t.type === "function").map((tool: Item) => {
    const { type: _type, ...fn } = tool;
    return { type: "function", function: fn };
  });
}

function isRecord(value: unknown): value is Item {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Turns OpenAI chat messages and tools into what the engine hands its chat template, so the
 * rendered prompt (and its tokens) match. vLLM: content parts joined with "\n" for templates that
 * expect string content, structured `{type:"text"}` parts for templates that loop over content,
 * tool-call arguments parsed from JSON, tools dumped with every declared field (missing ones as
 * null). SGLang: text parts joined with " ", non-text parts dropped, null fields dropped, tools
 * reduced to their `function` objects.
 */
import { ChatContentError } from "./errors.ts";
import type { ChatMessage } from "./types.ts";

/** Which engine's request handling to reproduce. */
export type ChatFlavor = "vllm" | "sglang";
/** How the template expects `message.content`: a string, or OpenAI-style parts it loops over. */
export type ContentFormat = "string" | "openai";

type Json = Record<string, unknown>;

const TEXT_TYPES = new Set(["text", "input_text", "output_text"]);

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** Text of one content part, undefined to skip it; throws for parts a text-only model cannot take. */
function partText(part: unknown, index: number, role: string): string | undefined {
  if (typeof part === "string") return part;
  if (!isObject(part)) {
    throw new ChatContentError(
      `Invalid content part ${index} of a ${role} message: expected an object`,
    );
  }
  const type = part.type;
  let text: unknown;
  if (typeof type === "string" && TEXT_TYPES.has(type)) text = part.text;
  else if (type === "refusal") text = part.refusal;
  else if (type === "thinking") text = part.thinking;
  else if (type === undefined || type === null) {
    throw new ChatContentError(`Content part ${index} of a ${role} message has no 'type' field`);
  } else {
    throw new ChatContentError(
      `Content part type '${
        String(type)
      }' (part ${index} of a ${role} message) needs a multimodal ` +
        "model; this model's tokenizer is text-only. Send text parts only.",
    );
  }
  if (text === undefined || text === null) return undefined; // vLLM skips empty parts
  if (typeof text !== "string") {
    throw new ChatContentError(`Content part ${index} of a ${role} message: text must be a string`);
  }
  return text;
}

function contentParts(content: unknown, role: string): unknown[] {
  if (content === undefined || content === null) return [];
  if (typeof content === "string") return [content];
  if (Array.isArray(content)) return content;
  throw new ChatContentError(
    `Invalid content of a ${role} message: expected a string or a list of parts`,
  );
}

function parseArguments(toolCalls: unknown[]): unknown[] {
  return toolCalls.map((call) => {
    if (!isObject(call) || !isObject(call.function)) return call;
    const args = call.function.arguments;
    let parsed: unknown = args;
    if (typeof args === "string") {
      try {
        parsed = JSON.parse(args);
      } catch {
        parsed = {}; // vLLM: anything that is not valid JSON becomes {}
      }
    } else if (args === null || typeof args !== "object") {
      parsed = {};
    }
    return { ...call, function: { ...call.function, arguments: parsed } };
  });
}

function vllmMessage(message: ChatMessage, format: ContentFormat): Json {
  const role = message.role;
  const texts: string[] = [];
  contentParts(message.content, role).forEach((part, i) => {
    const text = partText(part, i, role);
    if (text !== undefined) texts.push(text);
  });
  const out: Json = {
    role,
    content: format === "openai" && role !== "tool"
      ? texts.map((text) => ({ type: "text", text }))
      : texts.join("\n"),
  };
  if (role === "assistant") {
    if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) {
      out.tool_calls = parseArguments(message.tool_calls);
    }
    if (message.reasoning !== undefined && message.reasoning !== null) {
      out.reasoning = message.reasoning;
      out.reasoning_content = message.reasoning;
    }
  } else if (role === "tool" && "tool_call_id" in message) {
    out.tool_call_id = message.tool_call_id;
  }
  if (typeof message.name === "string") out.name = message.name;
  if (typeof message.task === "string") out.task = message.task;
  if (role === "developer") out.tools = message.tools ?? null;
  return out;
}

function sglangMessage(message: ChatMessage, format: ContentFormat): Json {
  const out: Json = {};
  for (const [key, value] of Object.entries(message)) {
    if (value !== null && value !== undefined) out[key] = value;
  }
  const content = message.content ?? "";
  if (Array.isArray(content)) {
    if (format === "openai") {
      out.content = content.map((part) =>
        isObject(part) && part.type === "image_url"
          ? { type: "image" }
          : isObject(part) && part.type === "audio_url"
          ? { type: "audio" }
          : part
      );
    } else {
      out.content = content
        .filter((part) => isObject(part) && part.type === "text")
        .map((part) => (part as Json).text)
        .join(" ");
    }
  } else {
    out.content = content;
  }
  if (message.role === "assistant" && Array.isArray(message.tool_calls)) {
    out.tool_calls = parseArguments(message.tool_calls);
  }
  return out;
}

/** The conversation as the engine passes it to `apply_chat_template`. Never mutates its input. */
export function prepareMessages(
  messages: ChatMessage[],
  flavor: ChatFlavor,
  format: ContentFormat,
): Json[] {
  return messages.map((m) =>
    flavor === "sglang" ? sglangMessage(m, format) : vllmMessage(m, format)
  );
}

/** The tools as the engine passes them to the template (null when the request has none). */
export function prepareTools(tools: unknown[] | undefined, flavor: ChatFlavor): unknown[] | null {
  if (tools === undefined || tools === null) return null;
  return tools.map((tool) => {
    if (!isObject(tool)) return tool;
    const fn = isObject(tool.function) ? tool.function : {};
    if (flavor === "sglang") {
      const { description, name, parameters, strict, ...rest } = fn;
      void rest; // pydantic drops unknown fields here
      return {
        description: description ?? null,
        name,
        parameters: parameters ?? null,
        strict: strict ?? false,
      };
    }
    const { type, function: _fn, ...toolRest } = tool;
    const { name, description, parameters, ...fnRest } = fn;
    return {
      type: type ?? "function",
      function: {
        name,
        description: description ?? null,
        parameters: parameters ?? null,
        ...fnRest,
      },
      ...toolRest,
    };
  });
}

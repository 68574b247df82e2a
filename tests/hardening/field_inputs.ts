/**
 * Every field of the completions and chat bodies (top level, inside a message, inside a content
 * part, inside stream_options and tools) given each wrong value in turn.
 */
import {
  CHAT,
  COMPLETIONS,
  jsonInput,
  type ProbeInput,
  validChat,
  validCompletion,
} from "./probe_input.ts";
import { WRONG_VALUES } from "./wrong_values.ts";

const COMMON_FIELDS = [
  "model",
  "max_tokens",
  "max_completion_tokens",
  "stream",
  "stream_options",
  "temperature",
  "top_p",
  "n",
  "stop",
  "seed",
  "user",
  "logit_bias",
  "presence_penalty",
  "frequency_penalty",
  "logprobs",
  "cache_salt",
  "priority",
  "extra_body",
];
const COMPLETION_FIELDS = ["prompt", "echo", "suffix", "best_of", ...COMMON_FIELDS];
const CHAT_FIELDS = [
  "messages",
  "tools",
  "tool_choice",
  "response_format",
  "chat_template",
  "chat_template_kwargs",
  "add_generation_prompt",
  "continue_final_message",
  "top_logprobs",
  ...COMMON_FIELDS,
];

export function fieldInputs(): ProbeInput[] {
  const inputs: ProbeInput[] = [];
  for (const value of WRONG_VALUES) {
    for (const field of COMPLETION_FIELDS) {
      inputs.push(
        jsonInput(`completions.${field}`, COMPLETIONS, { ...validCompletion(), [field]: value }),
      );
    }
    for (const field of CHAT_FIELDS) {
      inputs.push(jsonInput(`chat.${field}`, CHAT, { ...validChat(), [field]: value }));
    }
    inputs.push(...nestedFieldInputs(value));
  }
  return inputs;
}

/** Fields below the top level: a message's, a content part's, stream_options', a tool's. */
function nestedFieldInputs(value: unknown): ProbeInput[] {
  const chat = (family: string, patch: Record<string, unknown>) =>
    jsonInput(family, CHAT, { ...validChat(), ...patch });
  return [
    chat("chat.messages[].role", { messages: [{ role: value, content: "hi" }] }),
    chat("chat.messages[].content", { messages: [{ role: "user", content: value }] }),
    chat("chat.messages[].name", { messages: [{ role: "user", content: "hi", name: value }] }),
    chat("chat.messages[]", { messages: [value] }),
    chat("chat.messages[].content[].type", {
      messages: [{ role: "user", content: [{ type: value, text: "hi" }] }],
    }),
    chat("chat.messages[].content[].text", {
      messages: [{ role: "user", content: [{ type: "text", text: value }] }],
    }),
    chat("chat.messages[].tool_calls", {
      messages: [{ role: "assistant", content: null, tool_calls: value }],
    }),
    chat("chat.stream_options.include_usage", {
      stream: true,
      stream_options: { include_usage: value },
    }),
    chat("chat.tools[].function", { tools: [{ type: "function", function: value }] }),
    jsonInput("completions.prompt[]", COMPLETIONS, { ...validCompletion(), prompt: [value] }),
    jsonInput("completions.stream_options", COMPLETIONS, {
      ...validCompletion(),
      stream: true,
      stream_options: value,
    }),
  ];
}

/** Anthropic Messages bodies rendered into the chat vLLM builds from them (its serving.py). */
import { assertEquals, assertThrows } from "../assert.ts";
import { anthropicToChat, parseAnthropicMessages } from "../../src/openai/anthropic_messages.ts";
import { InvalidRequestError } from "../../src/openai/request.ts";

const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

Deno.test("system text, blocks and inline system messages become one leading system message, billing header dropped", () => {
  const { messages } = anthropicToChat({
    system: [
      { type: "text", text: "x-anthropic-billing-header: cc_version=1; hash=abc" },
      { type: "text", text: "You are terse. " },
    ],
    messages: [
      { role: "user", content: "Hi" },
      { role: "system", content: "Reminder." },
      { role: "assistant", content: [{ type: "text", text: "Hello" }] },
    ],
  });
  assertEquals(messages, [
    { role: "system", content: "You are terse. Reminder." },
    { role: "user", content: "Hi" },
    { role: "assistant", content: "Hello" },
  ]);
});

Deno.test("tool use and tool results become tool calls and tool messages; tools become functions", () => {
  const { messages, tools } = anthropicToChat({
    messages: [
      { role: "user", content: "Weather?" },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "Look it up." },
          { type: "tool_use", id: "tu_1", name: "weather", input: { city: "Oslo" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "tu_1", content: [{ type: "text", text: "-3C" }] },
          { type: "text", text: "Thanks" },
        ],
      },
    ],
    tools: [{ name: "weather", description: "Now", input_schema: { type: "object" } }],
  });
  assertEquals(messages, [
    { role: "user", content: "Weather?" },
    {
      role: "assistant",
      reasoning: "Look it up.",
      tool_calls: [{
        id: "tu_1",
        type: "function",
        function: { name: "weather", arguments: '{"city":"Oslo"}' },
      }],
    },
    { role: "tool", tool_call_id: "tu_1", content: "-3C" },
    { role: "user", content: "Thanks" },
  ]);
  assertEquals(tools, [{
    type: "function",
    function: {
      name: "weather",
      description: "Now",
      parameters: { type: "object" },
    },
  }]);
});

Deno.test("a user message of tool results alone adds no empty user message", () => {
  const { messages } = anthropicToChat({
    messages: [{
      role: "user",
      content: [{ type: "tool_result", tool_use_id: "t", content: "ok" }],
    }],
  });
  assertEquals(messages, [{ role: "tool", tool_call_id: "t", content: "ok" }]);
});

Deno.test("a Messages body lacking what vLLM requires is refused, naming the field", () => {
  const refused = (body: unknown) =>
    assertThrows(() => parseAnthropicMessages("messages", bytes(body)), InvalidRequestError);
  assertEquals(refused({ messages: [], max_tokens: 1 }).options.param, "model");
  assertEquals(refused({ model: "m", max_tokens: 1 }).options.param, "messages");
  assertEquals(refused({ model: "m", messages: [] }).options.param, "max_tokens");
  assertEquals(
    refused({ model: "m", max_tokens: 1, messages: [{ role: "bot", content: "x" }] }).options
      .param,
    "messages.0.role",
  );
  const parsed = parseAnthropicMessages(
    "messages",
    bytes({ model: "m", max_tokens: 4, stream: true, messages: [{ role: "user", content: "x" }] }),
  );
  assertEquals([parsed.model, parsed.stream, parsed.prompt.kind], ["m", true, "chat"]);
});

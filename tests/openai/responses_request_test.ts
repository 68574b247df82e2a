/** Responses bodies rendered into the chat vLLM builds from them (its construct_input_messages). */
import { assertEquals } from "../assert.ts";
import { parseResponsesRequest, renderResponsesInput } from "../../src/openai/responses_request.ts";

Deno.test("instructions, text and items become vLLM's chat: calls merged into the assistant turn", () => {
  const rendered = renderResponsesInput({
    instructions: "Be brief.",
    input: [
      { role: "user", content: [{ type: "input_text", text: "Weather?" }] },
      { type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: "Ask it." }] },
      { type: "function_call", call_id: "c1", name: "weather", arguments: '{"city":"Oslo"}' },
      { type: "function_call_output", call_id: "c1", output: "-3C" },
      {
        type: "message",
        role: "assistant",
        content: [{ type: "output_text", text: "It is -3C." }],
      },
    ],
    tools: [{ type: "function", name: "weather", parameters: { type: "object" } }],
  });
  assertEquals(rendered, {
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: [{ type: "input_text", text: "Weather?" }] },
      {
        role: "assistant",
        reasoning: "Ask it.",
        tool_calls: [{
          id: "c1",
          type: "function",
          function: { name: "weather", arguments: '{"city":"Oslo"}' },
        }],
      },
      { role: "tool", content: "-3C", tool_call_id: "c1" },
      { role: "assistant", content: "It is -3C." },
    ],
    tools: [{ type: "function", function: { name: "weather", parameters: { type: "object" } } }],
  });
  assertEquals(renderResponsesInput({ input: "Hi" }), {
    messages: [{ role: "user", content: "Hi" }],
    tools: undefined,
  });
});

Deno.test("a continued response or an item the router cannot render is not tokenized", () => {
  const bytes = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
  const next = parseResponsesRequest(
    "responses",
    bytes({ model: "m", input: "more", previous_response_id: "resp_1" }),
  );
  assertEquals([next.previousResponseId, next.prompt.kind], ["resp_1", "opaque"]);
  const encrypted = parseResponsesRequest(
    "responses",
    bytes({ model: "m", input: [{ type: "reasoning", encrypted_content: "x", summary: [] }] }),
  );
  assertEquals(encrypted.prompt.kind, "opaque");
});

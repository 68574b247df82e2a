import { assertEquals } from "../assert.ts";
import { HttpError } from "../../src/openai/errors.ts";
import { parseOpenAIRequest } from "../../src/openai/request.ts";

const bytes = (value: unknown) =>
  new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value));

function errorOf(fn: () => unknown): HttpError {
  try {
    fn();
  } catch (error) {
    if (error instanceof HttpError) return error;
    throw error;
  }
  throw new Error("expected an HttpError");
}

Deno.test("parseOpenAIRequest() reads a chat request with tools and template kwargs", () => {
  const parsed = parseOpenAIRequest(
    "chat",
    bytes({
      model: "qwen3",
      stream: true,
      messages: [{ role: "user", content: "hi" }],
      tools: [{ type: "function", function: { name: "f" } }],
      chat_template_kwargs: { enable_thinking: false },
      cache_salt: "s",
      unknown_field: 1,
    }),
  );
  assertEquals(parsed.stream, true);
  assertEquals(parsed.cacheSalt, "s");
  assertEquals(parsed.prompt.kind, "chat");
  if (parsed.prompt.kind === "chat") {
    assertEquals(parsed.prompt.chatTemplateKwargs, { enable_thinking: false });
    assertEquals(parsed.prompt.tools?.length, 1);
  }
  assertEquals(parsed.body.unknown_field, 1);
});

Deno.test("parseOpenAIRequest() takes token-id prompts as they are and routes batches by the first", () => {
  const ids = parseOpenAIRequest("completions", bytes({ model: "m", prompt: [1, 2, 3] }));
  assertEquals(ids.prompt, { kind: "tokens", tokens: [1, 2, 3], extraPromptCount: 0 });
  const batch = parseOpenAIRequest("completions", bytes({ model: "m", prompt: ["a", "b"] }));
  assertEquals(batch.prompt, { kind: "text", text: "a", extraPromptCount: 1 });
});

Deno.test("parseOpenAIRequest() answers 400 naming the field at fault", () => {
  const badJson = errorOf(() => parseOpenAIRequest("chat", bytes("{nope")));
  assertEquals(badJson.status, 400);
  assertEquals(badJson.options.code, "invalid_json");
  const noModel = errorOf(() =>
    parseOpenAIRequest("chat", bytes({ messages: [{ role: "user" }] }))
  );
  assertEquals(noModel.options.param, "model");
  assertEquals(noModel.message, "Missing required parameter: 'model'");
  const badRole = errorOf(() =>
    parseOpenAIRequest("chat", bytes({ model: "m", messages: [{ content: "x" }] }))
  );
  assertEquals(badRole.options.param, "messages[0].role");
  const badPrompt = errorOf(() =>
    parseOpenAIRequest("completions", bytes({ model: "m", prompt: 5 }))
  );
  assertEquals(badPrompt.options.param, "prompt");
  const badStream = errorOf(() =>
    parseOpenAIRequest("completions", bytes({ model: "m", prompt: "x", stream: "yes" }))
  );
  assertEquals(badStream.options.param, "stream");
  const array = errorOf(() => parseOpenAIRequest("completions", bytes([1])));
  assertEquals(array.status, 400);
});

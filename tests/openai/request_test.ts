import { assert, assertEquals } from "../assert.ts";
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

Deno.test("parseOpenAIRequest() takes token-id prompts as they are and routes batches by their shared prefix", () => {
  const ids = parseOpenAIRequest("completions", bytes({ model: "m", prompt: [1, 2, 3] }));
  assertEquals(ids.prompt, { kind: "tokens", tokens: [1, 2, 3], extraPromptCount: 0 });
  const texts = ["Summarize: the cat", "Summarize: the dog", "Summarize: a bird"];
  const batch = parseOpenAIRequest("completions", bytes({ model: "m", prompt: texts }));
  assertEquals(batch.prompt, {
    kind: "text",
    text: "Summarize: ",
    extraPromptCount: 2,
    batchSize: texts.join("").length,
  });
  const lists = [[5, 6, 7, 8], [5, 6, 7, 9, 9], [5, 6, 1]];
  const ids3 = parseOpenAIRequest("completions", bytes({ model: "m", prompt: lists }));
  assertEquals(ids3.prompt, { kind: "tokens", tokens: [5, 6], extraPromptCount: 2, batchSize: 12 });
  const one = parseOpenAIRequest("completions", bytes({ model: "m", prompt: [[4, 5]] }));
  assertEquals(one.prompt, { kind: "tokens", tokens: [4, 5], extraPromptCount: 0 });
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

/** The 400 for one completions (or chat) body, as `[param, message]`. */
function rejection(endpoint: "completions" | "chat", body: Record<string, unknown>) {
  const base = endpoint === "chat"
    ? { model: "m", messages: [{ role: "user", content: "hi" }] }
    : { model: "m", prompt: "hi" };
  const error = errorOf(() => parseOpenAIRequest(endpoint, bytes({ ...base, ...body })));
  assertEquals([error.status, error.options.code], [400, "invalid_value"], error.message);
  return [error.options.param, error.message] as const;
}

Deno.test("parseOpenAIRequest() checks the types of OpenAI's sampling fields and names the one at fault", () => {
  for (const endpoint of ["completions", "chat"] as const) {
    assertEquals(rejection(endpoint, { temperature: "hot" }), [
      "temperature",
      "Invalid 'temperature': Invalid input: expected number, received string",
    ]);
    for (
      const [param, value] of [
        ["top_p", "1"],
        ["presence_penalty", true],
        ["frequency_penalty", [0.5]],
        ["seed", 1.5],
        ["seed", "42"],
        ["n", 1.5],
        ["max_tokens", "16"],
        ["stop", 5],
        ["logit_bias", [1]],
        ["logit_bias", "x"],
      ] as const
    ) {
      const [at, message] = rejection(endpoint, { [param]: value });
      assertEquals(at, param, `${endpoint} ${param}=${JSON.stringify(value)}`);
      assert(message.startsWith(`Invalid '${param}': `), message);
    }
    assertEquals(rejection(endpoint, { stop: ["\n", 7] }), [
      "stop[1]",
      "Invalid 'stop[1]': Invalid input: expected string, received number",
    ]);
    assertEquals(rejection(endpoint, { stop: { a: 1 } }), [
      "stop",
      "Invalid 'stop': must be a string or an array of strings",
    ]);
    assertEquals(rejection(endpoint, { logit_bias: { "50256": "-100" } }), [
      "logit_bias.50256",
      "Invalid 'logit_bias.50256': Invalid input: expected number, received string",
    ]);
  }
  // Completions count log probabilities; chat switches them on and counts top_logprobs.
  assertEquals(rejection("completions", { logprobs: true })[0], "logprobs");
  assertEquals(rejection("completions", { best_of: "2" })[0], "best_of");
  assertEquals(rejection("completions", { echo: 1 })[0], "echo");
  assertEquals(rejection("completions", { suffix: 1 })[0], "suffix");
  assertEquals(rejection("chat", { logprobs: 5 })[0], "logprobs");
  assertEquals(rejection("chat", { top_logprobs: true })[0], "top_logprobs");
  assertEquals(rejection("chat", { max_completion_tokens: "9" })[0], "max_completion_tokens");
});

Deno.test("parseOpenAIRequest() accepts well-typed and null sampling fields and passes unknown ones through", () => {
  const sampling = {
    temperature: 0.7,
    top_p: 1,
    presence_penalty: -0.5,
    frequency_penalty: 0,
    seed: 2 ** 63, // engines take 64-bit seeds
    stop: ["\n", "###"],
    logit_bias: { "50256": -100, "1": 2.5 },
    n: 2,
    max_tokens: 16,
    top_k: 20, // an engine extension: not ours to check
    min_p: "engine's business",
  };
  const completion = parseOpenAIRequest(
    "completions",
    bytes({
      model: "m",
      prompt: "x",
      ...sampling,
      logprobs: 5,
      best_of: 3,
      echo: true,
      suffix: "",
    }),
  );
  assertEquals(completion.body.min_p, "engine's business");
  assertEquals(completion.body.logit_bias, sampling.logit_bias);
  const chat = parseOpenAIRequest(
    "chat",
    bytes({
      model: "m",
      messages: [{ role: "user", content: "x" }],
      ...sampling,
      stop: "\n",
      logprobs: true,
      top_logprobs: 3,
      max_completion_tokens: 16,
    }),
  );
  assertEquals(chat.body.top_k, 20);
  const nulls = Object.fromEntries(
    [
      "temperature",
      "top_p",
      "presence_penalty",
      "frequency_penalty",
      "seed",
      "stop",
      "logit_bias",
      "logprobs",
      "top_logprobs",
      "n",
      "max_tokens",
      "max_completion_tokens",
      "best_of",
      "echo",
      "suffix",
    ].map((key) => [key, null]),
  );
  parseOpenAIRequest("completions", bytes({ model: "m", prompt: "x", ...nulls }));
  parseOpenAIRequest("chat", bytes({ model: "m", messages: [{ role: "user" }], ...nulls }));
});

Deno.test("parseOpenAIRequest() tells the prompt forms apart by their first element", () => {
  const forms =
    "must be a string, an array of strings, an array of token ids, or an array of token-id arrays";
  const prompt = (value: unknown) => rejection("completions", { prompt: value });
  for (const value of [5, null, true, {}, [], [null], [1.5], ["a", 5], [5, "a"], [[1], "a"]]) {
    assertEquals(prompt(value), ["prompt", `Invalid 'prompt': ${forms}`], JSON.stringify(value));
  }
  // A wrong type anywhere outranks an id out of range.
  assertEquals(prompt([-1, 2.5])[0], "prompt");
  assertEquals(prompt([[1], [2, "x"]])[0], "prompt");
  assertEquals(prompt([[-1], ["x"]])[0], "prompt");
  assertEquals(prompt([1, -1]), [
    "prompt[1]",
    "Invalid 'prompt[1]': Too small: expected number to be >=0",
  ]);
  assertEquals(prompt([2 ** 31]), [
    "prompt[0]",
    "Invalid 'prompt[0]': Too big: expected number to be <=2147483647",
  ]);
  assertEquals(prompt([[1], []]), [
    "prompt[1]",
    "Invalid 'prompt[1]': Too small: expected array to have >=1 items",
  ]);
  assertEquals(prompt([[1], [2, 2 ** 31]])[0], "prompt[1][1]");
  const missing = errorOf(() => parseOpenAIRequest("completions", bytes({ model: "m" })));
  assertEquals([missing.options.param, missing.message], ["prompt", `Invalid 'prompt': ${forms}`]);
  const max = parseOpenAIRequest("completions", bytes({ model: "m", prompt: [0, 2 ** 31 - 1] }));
  assertEquals(max.prompt, { kind: "tokens", tokens: [0, 2 ** 31 - 1], extraPromptCount: 0 });
  const batch = parseOpenAIRequest("completions", bytes({ model: "m", prompt: [[1, 2], [3]] }));
  assertEquals(batch.prompt, { kind: "tokens", tokens: [], extraPromptCount: 1, batchSize: 3 });
});

Deno.test("parseOpenAIRequest() checks messages one by one and reports the first bad one", () => {
  const chat = (body: Record<string, unknown>) =>
    errorOf(() => parseOpenAIRequest("chat", bytes({ model: "m", ...body })));
  const missing = chat({});
  assertEquals([missing.options.code, missing.message], [
    "missing_required_parameter",
    "Missing required parameter: 'messages'",
  ]);
  assertEquals(
    chat({ messages: [] }).message,
    "Invalid 'messages': must contain at least one message",
  );
  assertEquals(
    chat({ messages: 5 }).message,
    "Invalid 'messages': Invalid input: expected array, received number",
  );
  const second = chat({ messages: [{ role: "user" }, { role: "" }, 7] });
  assertEquals(second.options.param, "messages[1].role");
  assertEquals(chat({ messages: [{ role: "user" }, [1]] }).options.param, "messages[1]");
  assertEquals(chat({ messages: [{ role: "user" }], tools: {} }).options.param, "tools");
  assertEquals(
    chat({ messages: [{ role: "user" }], chat_template_kwargs: [] }).message,
    "Invalid 'chat_template_kwargs': Invalid input: expected record, received array",
  );
});

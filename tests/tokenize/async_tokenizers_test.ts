import { assert, assertEquals, assertMatch, assertRejects } from "../assert.ts";
import { EngineTokenizer } from "../../src/tokenize/engine_tokenizer.ts";
import { ChatTemplateError, TokenizeUnavailableError } from "../../src/tokenize/errors.ts";
import { TokenizeFailureLog } from "../../src/tokenize/failure_log.ts";
import { LocalAsyncTokenizer } from "../../src/tokenize/local_async_tokenizer.ts";
import { NoneTokenizer } from "../../src/tokenize/none_tokenizer.ts";
import { tryTokenize } from "../../src/tokenize/try_tokenize.ts";
import type { ChatMessage, PromptTokenizer } from "../../src/tokenize/types.ts";
import { startFakeTokenizeEndpoint } from "../fakes/fake_tokenize_endpoint.ts";
import { goldenFile, packagedTokenizer } from "./fixtures.ts";

const golden = await goldenFile();
const chat = golden.chats[2]; // tools
const { tools, ...chatTemplateKwargs } = chat.kw as { tools: unknown[] };

function quietLog(lines: string[] = []) {
  return new TokenizeFailureLog({ label: "qwen3", log: (line) => lines.push(line) });
}

for (const engine of ["vllm", "sglang"] as const) {
  Deno.test(`engine mode (${engine}) gets the golden ids from the engine's tokenize endpoint`, async () => {
    const local = await packagedTokenizer("qwen3");
    const server = startFakeTokenizeEndpoint({
      backend: {
        encode: (text, o) => local.encode(text, o),
        encodeChat: (m, o) => local.encodeChat(m, o),
      },
    });
    try {
      const tokenizer = new EngineTokenizer({
        engine,
        model: "Qwen/Qwen3-8B",
        baseUrl: server.url,
        timeoutMs: 2000,
      });
      assertEquals(tokenizer.mode, "engine");
      const completion = golden.completions[0];
      assertEquals(await tokenizer.encode(completion.prompt), completion.ids);
      assertEquals(
        await tokenizer.encodeChat(chat.messages, { tools, chatTemplateKwargs }),
        chat.ids,
      );
      const path = engine === "vllm" ? "/tokenize" : "/v1/tokenize";
      assertEquals(server.requests[0], {
        path,
        body: { model: "Qwen/Qwen3-8B", prompt: completion.prompt, add_special_tokens: true },
      });
      const chatBody: Record<string, unknown> = { model: "Qwen/Qwen3-8B", messages: chat.messages };
      if (engine === "vllm") chatBody.add_generation_prompt = true;
      chatBody.tools = tools;
      chatBody.chat_template_kwargs = chatTemplateKwargs;
      assertEquals(server.requests[1], { path, body: chatBody });
    } finally {
      await server.close();
    }
  });
}

Deno.test("engine mode turns an engine error into TokenizeUnavailableError, counts it and logs the outage once", async () => {
  const server = startFakeTokenizeEndpoint({
    backend: { encode: () => [1], encodeChat: () => [1] },
    failWith: 500,
  });
  const lines: string[] = [];
  const seen: number[] = [];
  const failures = new TokenizeFailureLog({
    label: "qwen3",
    log: (l) => lines.push(l),
    onFailure: (e) => seen.push(e.count),
  });
  try {
    const tokenizer = new EngineTokenizer({
      engine: "vllm",
      model: "m",
      baseUrl: server.url,
      timeoutMs: 2000,
      failures,
    });
    for (let i = 0; i < 3; i++) {
      const error = await assertRejects(() => tokenizer.encode("hello"));
      assert(error instanceof TokenizeUnavailableError);
      assertEquals(error.reason, "failed");
      assertMatch(error.message, /answered 500/);
    }
    assertEquals(failures.count, 3);
    assertEquals(seen, [1, 2, 3]);
    assertEquals(lines.length, 1);
    assertMatch(lines[0], /Tokenizer \(engine\) for qwen3 failed: .*load only/);
    // Recovery re-arms the log: the next outage is reported again.
    server.options.failWith = undefined;
    assertEquals(await tokenizer.encode("hello"), [1]);
    server.options.failWith = 503;
    await assertRejects(() => tokenizer.encode("hello"));
    assertEquals(lines.length, 2);
  } finally {
    await server.close();
  }
});

Deno.test("engine mode gives up after its timeout", async () => {
  const server = startFakeTokenizeEndpoint({
    backend: { encode: () => [1], encodeChat: () => [1] },
    delayMs: 300,
  });
  try {
    const tokenizer = new EngineTokenizer({
      engine: "sglang",
      model: "m",
      baseUrl: server.url,
      timeoutMs: 50,
      failures: quietLog(),
    });
    const started = performance.now();
    const error = await assertRejects(() => tokenizer.encode("slow"));
    assert(error instanceof TokenizeUnavailableError);
    assertMatch(error.message, /timed out after 50 ms/);
    assert(performance.now() - started < 250, "did not wait for the slow answer");
  } finally {
    await server.close();
  }
});

Deno.test("engine mode fails cleanly on a bad body, a refused connection or no instance", async () => {
  const badBody: typeof fetch = () => Promise.resolve(Response.json({ count: 2 }));
  const cases: [ConstructorParameters<typeof EngineTokenizer>[0], RegExp][] = [
    [
      { engine: "vllm", model: "m", baseUrl: "http://x", timeoutMs: 100, fetch: badBody },
      /without a "tokens" list/,
    ],
    [{ engine: "vllm", model: "m", baseUrl: "http://127.0.0.1:9", timeoutMs: 1000 }, /failed/],
    [{ engine: "vllm", model: "m", baseUrl: () => undefined, timeoutMs: 100 }, /no vllm instance/],
  ];
  for (const [options, message] of cases) {
    const tokenizer = new EngineTokenizer({ ...options, failures: quietLog() });
    const error = await assertRejects(() => tokenizer.encodeChat([{ role: "user", content: "x" }]));
    assert(error instanceof TokenizeUnavailableError);
    assertMatch(error.message, message);
  }
});

Deno.test("none mode yields no tokens for text and chat, so dispatch falls back to load only", async () => {
  const tokenizer = new NoneTokenizer();
  assertEquals(tokenizer.mode, "none");
  const outcome = await tryTokenize(tokenizer.encode());
  assertEquals(outcome.ok, false);
  if (!outcome.ok) assertEquals(outcome.reason, "disabled");
  const chatError = await assertRejects(() => tokenizer.encodeChat());
  assert(chatError instanceof TokenizeUnavailableError && chatError.reason === "disabled");
});

Deno.test("local mode passes the request's own errors through and turns internal failures into load-only dispatch", async () => {
  const broken: PromptTokenizer = {
    encode: () => {
      throw new RangeError("wasm trap");
    },
    encodeChat: (_m: ChatMessage[]) => {
      throw new ChatTemplateError("System message first");
    },
  };
  const lines: string[] = [];
  const tokenizer = new LocalAsyncTokenizer(broken, quietLog(lines));
  const outcome = await tryTokenize(tokenizer.encode("x"));
  assertEquals(outcome.ok, false);
  if (!outcome.ok) {
    assertEquals(outcome.reason, "failed");
    assertMatch(outcome.error.message, /wasm trap/);
  }
  assertEquals(tokenizer.failures.count, 1);
  assertEquals(lines.length, 1);
  const inputError = await assertRejects(() =>
    tryTokenize(tokenizer.encodeChat([{ role: "user", content: "x" }]))
  );
  assert(inputError instanceof ChatTemplateError); // a 400 for the client, not a fallback
  assertEquals(tokenizer.failures.count, 1);
});

Deno.test("local mode resolves to the same ids as the synchronous tokenizer", async () => {
  const local = await packagedTokenizer("qwen3");
  const tokenizer = new LocalAsyncTokenizer(local);
  assertEquals(tokenizer.mode, "local");
  assertEquals(
    await tryTokenize(tokenizer.encodeChat(chat.messages, { tools, chatTemplateKwargs })),
    {
      ok: true,
      tokens: chat.ids,
    },
  );
});

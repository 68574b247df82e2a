/**
 * Anthropic's Messages API through the router: rendered as vLLM renders it and routed cache-aware
 * like a chat, answers and streams passed through, the router's own errors in Anthropic's shape,
 * and Anthropic's SDK parsing all of it. The fake engines answer /v1/messages as vLLM does
 * (src/fakes/fake_anthropic.ts).
 */
import Anthropic from "@anthropic-ai/sdk";
import { assert, assertEquals, assertRejects } from "../assert.ts";
import { anthropicToChat } from "../../src/openai/anthropic_messages.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import { CHUNK, MODEL, startTestCluster, type TestCluster } from "../support/harness.ts";

const CONVERSATION = {
  model: MODEL,
  max_tokens: 3,
  system: "You answer questions about the tidegate router in one short sentence. ".repeat(8),
  messages: [{ role: "user", content: "What does the router send to the engine first?" }],
};

async function withCluster(test: (t: TestCluster) => Promise<void>): Promise<void> {
  const t = await startTestCluster({ model: { tokenizer: { path: "builtin:qwen3" } } });
  try {
    await test(t);
  } finally {
    await t.close();
  }
}

function post(url: string, body: unknown, path = "/v1/messages"): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" },
    body: JSON.stringify(body),
  });
}

Deno.test("a Messages request goes to the instance holding its rendered prefix, as a chat would", async () => {
  await withCluster(async (t) => {
    const tokenizer = await loadTokenizer("builtin:qwen3");
    const { messages, tools } = anthropicToChat(CONVERSATION);
    const tokens = tokenizer.encodeChat(messages, { tools });
    const chunks = Math.floor(tokens.length / CHUNK);
    assert(chunks >= 4, `a prompt of ${tokens.length} tokens`);
    t.hold(2, tokens, chunks);
    const response = await post(t.url, CONVERSATION);
    const answer = await response.json();
    assertEquals(response.status, 200, JSON.stringify(answer));
    assertEquals(response.headers.get("x-tidegate-instance"), "e2");
    assertEquals(response.headers.get("x-tidegate-prompt-tokens"), String(tokens.length));
    assertEquals(response.headers.get("x-tidegate-hit-tokens"), String(chunks * CHUNK));
    assertEquals(answer.type, "message");
    assertEquals(answer.content[0].type, "text");
    const got = t.engines[2].stats.requests.at(-1)!;
    assertEquals(got.path, "/v1/messages");
    assertEquals(got.body, CONVERSATION, "forwarded as sent: the engine converts it itself");
  });
});

Deno.test("Anthropic's SDK parses the router's answers, streams and errors on /v1/messages", async () => {
  await withCluster(async (t) => {
    const client = new Anthropic({ apiKey: "unused", baseURL: t.url, maxRetries: 0 });
    const message = await client.messages.create({
      model: MODEL,
      max_tokens: 3,
      messages: [{ role: "user", content: "Hello" }],
    });
    assertEquals(message.type, "message");
    assertEquals(message.stop_reason, "max_tokens");
    assert(message.usage.input_tokens > 0);

    const stream = client.messages.stream({
      model: MODEL,
      max_tokens: 3,
      messages: [{ role: "user", content: "Hello" }],
    });
    const final = await stream.finalMessage();
    assertEquals(final.content[0].type, "text");
    assertEquals(final.usage.output_tokens, 3);

    const unknown = await assertRejects(
      () =>
        client.messages.create({
          model: "no-such-model",
          max_tokens: 3,
          messages: [{ role: "user", content: "Hello" }],
        }),
      Anthropic.NotFoundError,
    );
    assertEquals(unknown.status, 404);

    await assertRejects(
      () =>
        client.messages.create(
          { model: MODEL, messages: [{ role: "user", content: "Hello" }] } as never,
        ),
      Anthropic.BadRequestError,
    );
  });
});

Deno.test("the router's own errors on /v1/messages are in Anthropic's shape", async () => {
  await withCluster(async (t) => {
    const cases: [unknown, number, string][] = [
      [{ ...CONVERSATION, model: "nope" }, 404, "not_found_error"],
      [{ ...CONVERSATION, max_tokens: undefined }, 400, "invalid_request_error"],
      [{ ...CONVERSATION, messages: "hi" }, 400, "invalid_request_error"],
    ];
    for (const [body, status, type] of cases) {
      const response = await post(t.url, body);
      const answer = await response.json();
      assertEquals(response.status, status, JSON.stringify(answer));
      assertEquals(answer.type, "error");
      assertEquals(answer.error.type, type);
      assert(typeof answer.error.message === "string" && answer.error.message.length > 0);
    }
    const notJson = await fetch(`${t.url}/v1/messages`, { method: "POST", body: "{" });
    assertEquals(notJson.status, 400);
    assertEquals((await notJson.json()).error.type, "invalid_request_error");
    for (const engine of t.engines) await engine.close();
    const down = await post(t.url, CONVERSATION);
    const answer = await down.json();
    assert(down.status >= 500, `${down.status}`);
    assertEquals(answer.type, "error");
    assertEquals(answer.error.type, "api_error");
  });
});

Deno.test("count_tokens reaches an engine and its answer comes back", async () => {
  await withCluster(async (t) => {
    const response = await post(t.url, CONVERSATION, "/v1/messages/count_tokens");
    const answer = await response.json();
    assertEquals(response.status, 200, JSON.stringify(answer));
    assert(answer.input_tokens > 0);
    const missing = await post(t.url, { model: "nope" }, "/v1/messages/count_tokens");
    assertEquals(missing.status, 404);
    assertEquals((await missing.json()).error.type, "not_found_error");
  });
});

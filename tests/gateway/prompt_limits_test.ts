/**
 * Bounded work per request: a prompt over the model's character limit is refused with 413 before
 * any tokenizing or dispatch, one over its token limit with OpenAI's context-length 400; neither
 * reaches an engine or leaves a lease behind.
 */
import { assertEquals, assertMatch } from "../assert.ts";
import { completion, MODEL, range, startTestCluster } from "../support/harness.ts";

Deno.test("a prompt over limits.maxPromptChars gets a 413 naming the limit and never reaches an engine", async () => {
  const t = await startTestCluster({ engines: 1, model: { limits: { maxPromptChars: 1_000 } } });
  try {
    const text = await completion(t.url, { prompt: "x".repeat(1_001) });
    assertEquals(text.status, 413);
    const error = (await text.json()).error;
    assertEquals(error.code, "prompt_too_large");
    assertEquals(error.param, "prompt");
    assertMatch(error.message, /1001 characters.*at most 1000/);
    const chat = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        messages: [
          { role: "system", content: "y".repeat(600) },
          { role: "user", content: [{ type: "text", text: "z".repeat(600) }] },
        ],
      }),
    });
    assertEquals(chat.status, 413);
    assertEquals((await chat.json()).error.param, "messages");
    assertEquals(t.engines[0].stats.requests.length, 0);
    const fits = await completion(t.url, { prompt: "x".repeat(1_000) });
    assertEquals(fits.status, 200);
    await fits.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("the default limit refuses a 5M-character prompt at once and the router keeps answering", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const [huge, health] = await Promise.all([
      completion(t.url, { prompt: "word ".repeat(1_000_000) }),
      fetch(`${t.url}/healthz`),
    ]);
    assertEquals(huge.status, 413);
    assertEquals((await huge.json()).error.code, "prompt_too_large");
    assertEquals(health.status, 200);
    await health.body?.cancel();
    assertEquals(t.engines[0].stats.requests.length, 0);
  } finally {
    await t.close();
  }
});

Deno.test("a prompt over limits.maxPromptTokens gets OpenAI's context_length_exceeded and its lease back", async () => {
  const t = await startTestCluster({ engines: 1, model: { limits: { maxPromptTokens: 256 } } });
  try {
    const asked = t.master.count;
    const over = await completion(t.url, { prompt: range(1, 257) });
    assertEquals(over.status, 400);
    assertEquals(t.master.count, asked, "refused before its keys were looked up");
    const error = (await over.json()).error;
    assertEquals(error.code, "context_length_exceeded");
    assertMatch(error.message, /maximum context length is 256 tokens.*257 tokens/);
    const load = t.router.registry.runtime(MODEL)!.cluster.account.load("e0");
    assertEquals([load.prefillRequests, load.prefillTokens, load.decodeRequests], [0, 0, 0]);
    assertEquals(t.engines[0].stats.requests.length, 0);
    const fits = await completion(t.url, { prompt: range(1, 256) });
    assertEquals(fits.status, 200);
    await fits.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("maxPromptChars counts every template input: tools, tool calls and results, documents, kwargs", async () => {
  const t = await startTestCluster({ engines: 1, model: { limits: { maxPromptChars: 10_000 } } });
  try {
    const big = "d".repeat(20_000);
    const user = { role: "user", content: "hi" };
    const bodies: Record<string, unknown>[] = [
      {
        messages: [user],
        tools: [{ type: "function", function: { name: "f", description: big } }],
      },
      { messages: [user], tools: [{ type: "function", function: { name: big } }] },
      { messages: [user], documents: [{ title: "t", text: big }] },
      { messages: [user], chat_template_kwargs: { note: big } },
      {
        messages: [user, {
          role: "assistant",
          tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: big } }],
        }],
      },
      { messages: [user, { role: "tool", tool_call_id: "c", content: big }] },
      { messages: [{ role: "user", content: "x", name: big }] },
    ];
    for (const body of bodies) {
      const response = await fetch(`${t.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, ...body }),
      });
      assertEquals(response.status, 413, JSON.stringify(body).slice(0, 80));
      const error = (await response.json()).error;
      assertEquals(error.code, "prompt_too_large");
      assertMatch(error.message, /more than 10000 characters/);
    }
    assertEquals(t.engines[0].stats.requests.length, 0);
  } finally {
    await t.close();
  }
});

Deno.test("a 20M-character tool description is refused by the default limit and the router lives", async () => {
  const t = await startTestCluster({ engines: 1, model: { tokenizer: { path: "builtin:qwen3" } } });
  try {
    const tool = {
      type: "function",
      function: { name: "f", description: "w ".repeat(10_000_000) },
    };
    const response = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: "hi" }],
        tools: [tool],
      }),
    });
    assertEquals(response.status, 413);
    assertEquals((await response.json()).error.code, "prompt_too_large");
    const health = await fetch(`${t.url}/healthz`);
    assertEquals(health.status, 200);
    await health.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("a token id counts as 4 characters toward maxPromptChars", async () => {
  const t = await startTestCluster({ engines: 1, model: { limits: { maxPromptChars: 4_000 } } });
  try {
    const over = await completion(t.url, { prompt: range(1, 1_001) });
    assertEquals(over.status, 413);
    assertMatch((await over.json()).error.message, /1001 token ids \(4 characters each\)/);
    const fits = await completion(t.url, { prompt: range(1, 1_000) });
    assertEquals(fits.status, 200);
    await fits.body?.cancel();
  } finally {
    await t.close();
  }
});

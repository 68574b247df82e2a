/**
 * OpenAI's Responses API through the router: a new conversation rendered as vLLM renders it and
 * routed cache-aware; a request continuing a stored response, and a GET or cancel of one, sent to
 * the engine that stored it (vLLM keeps them in that server's memory); vLLM's own 404 when no
 * engine known to the router stored it; OpenAI's SDK parsing all of it.
 */
import OpenAI from "openai";
import { assert, assertEquals, assertRejects } from "../assert.ts";
import { renderResponsesInput } from "../../src/openai/responses_request.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import { CHUNK, MODEL, startTestCluster, type TestCluster } from "../support/harness.ts";

async function withCluster(
  test: (t: TestCluster) => Promise<void>,
  model: Record<string, unknown> = {},
): Promise<void> {
  const t = await startTestCluster({
    model: { tokenizer: { path: "builtin:qwen3" }, ...model },
  });
  try {
    await test(t);
  } finally {
    await t.close();
  }
}

function post(url: string, body: unknown, path = "/v1/responses"): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

const OPENING = {
  model: MODEL,
  max_output_tokens: 2,
  instructions: "You answer questions about harbour gates in one sentence. ".repeat(8),
  input: [{ role: "user", content: [{ type: "input_text", text: "When is the gate shut?" }] }],
};

Deno.test("a new Responses conversation goes to the instance holding its rendered prefix", async () => {
  await withCluster(async (t) => {
    const tokenizer = await loadTokenizer("builtin:qwen3");
    const { messages, tools } = renderResponsesInput(OPENING)!;
    const tokens = tokenizer.encodeChat(messages, { tools });
    const chunks = Math.floor(tokens.length / CHUNK);
    assert(chunks >= 4, `${tokens.length} tokens`);
    t.hold(1, tokens, chunks);
    const response = await post(t.url, OPENING);
    const answer = await response.json();
    assertEquals(response.status, 200, JSON.stringify(answer));
    assertEquals(response.headers.get("x-tidegate-instance"), "e1");
    assertEquals(response.headers.get("x-tidegate-prompt-tokens"), String(tokens.length));
    assertEquals(response.headers.get("x-tidegate-hit-tokens"), String(chunks * CHUNK));
    assertEquals(answer.object, "response");
  });
});

Deno.test("follow-ups, retrievals and cancels of a stored response reach the engine that stored it", async () => {
  // Round robin: without the response's home, consecutive requests would change instance.
  await withCluster(async (t) => {
    for (const stream of [false, true]) {
      const first = await post(t.url, { ...OPENING, stream });
      const home = first.headers.get("x-tidegate-instance")!;
      const text = await first.text();
      const id = stream
        ? JSON.parse(text.split("\n").find((l) => l.includes('"response.created"'))!.slice(6))
          .response.id
        : JSON.parse(text).id;
      assert(id.startsWith("resp_"), id);
      for (let turn = 0; turn < 4; turn++) {
        const next = await post(t.url, {
          model: MODEL,
          max_output_tokens: 2,
          previous_response_id: id,
          input: `Turn ${turn}?`,
        });
        const answer = await next.json();
        assertEquals(next.status, 200, JSON.stringify(answer));
        assertEquals(next.headers.get("x-tidegate-instance"), home, `turn ${turn}`);
      }
      const got = await fetch(`${t.url}/v1/responses/${id}`);
      assertEquals(got.status, 200);
      assertEquals(got.headers.get("x-tidegate-instance"), home);
      assertEquals((await got.json()).id, id);
      const cancel = await post(t.url, {}, `/v1/responses/${id}/cancel`);
      assertEquals(cancel.status, 400, "the engine's own verdict: it was not a background one");
      assertEquals((await cancel.json()).error.message, "Cannot cancel a synchronous response.");
    }
  }, { policy: "round_robin" });
});

Deno.test("a response no engine known to the router stored gets vLLM's own 404", async () => {
  await withCluster(async (t) => {
    const expected = {
      error: {
        message: "Response with id 'resp_nope' not found.",
        type: "invalid_request_error",
        param: "response_id",
        code: 404,
      },
    };
    const got = await fetch(`${t.url}/v1/responses/resp_nope`);
    assertEquals([got.status, await got.json()], [404, expected]);
    const cancel = await post(t.url, {}, "/v1/responses/resp_nope/cancel");
    assertEquals([cancel.status, await cancel.json()], [404, expected]);
    const next = await post(t.url, {
      model: MODEL,
      input: "more",
      previous_response_id: "resp_nope",
    });
    assertEquals([next.status, await next.json()], [404, expected]);
    // Its engine left the pool: the response left with it.
    const first = await (await post(t.url, OPENING)).json();
    const home = await findHome(t, first.id);
    const admin = await fetch(`${t.url}/admin/instances/${MODEL}/${home}`, { method: "DELETE" });
    assertEquals(admin.status, 200, await admin.text());
    const gone = await fetch(`${t.url}/v1/responses/${first.id}`);
    assertEquals(gone.status, 404);
    assertEquals((await gone.json()).error.param, "response_id");
  });
});

/** The instance whose engine stored `id`. */
async function findHome(t: TestCluster, id: string): Promise<string> {
  for (const engine of t.engines) {
    const answer = await fetch(`${engine.url}/v1/responses/${id}`);
    await answer.body?.cancel();
    if (answer.ok) return engine.id;
  }
  throw new Error(`no engine stored ${id}`);
}

Deno.test("OpenAI's SDK parses the router's Responses answers, streams and errors", async () => {
  await withCluster(async (t) => {
    const client = new OpenAI({ apiKey: "unused", baseURL: `${t.url}/v1`, maxRetries: 0 });
    const first = await client.responses.create({
      model: MODEL,
      input: "Hello",
      max_output_tokens: 2,
    });
    assertEquals(first.status, "completed");
    assert(first.output_text.length > 0);
    const next = await client.responses.create({
      model: MODEL,
      input: "And then?",
      previous_response_id: first.id,
      max_output_tokens: 2,
    });
    assertEquals(next.status, "completed");
    const retrieved = await client.responses.retrieve(first.id);
    assertEquals(retrieved.id, first.id);
    const stream = await client.responses.create({
      model: MODEL,
      input: "Stream it",
      max_output_tokens: 3,
      stream: true,
    });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    assertEquals(types[0], "response.created");
    assertEquals(types.at(-1), "response.completed");
    const missing = await assertRejects(
      () => client.responses.retrieve("resp_missing"),
      OpenAI.NotFoundError,
    );
    assertEquals(missing.status, 404);
  });
});

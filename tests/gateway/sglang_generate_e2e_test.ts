/**
 * SGLang's native /generate through the router: tokenized and routed cache-aware like a
 * completions prompt, only to the model's SGLang engines, answers and streams passed through, the
 * engine's usage read from `meta_info`. The fake engines answer /generate as SGLang does
 * (src/fakes/fake_sglang_generate.ts); a vLLM-flavoured fake has no such route.
 */
import { assert, assertEquals } from "../assert.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import { waitFor } from "../support/eventually.ts";
import { CHUNK, range, startTestCluster, type TestCluster } from "../support/harness.ts";

const TEXT = "The router reads SGLang's native prompt and sends it where its prefix is cached. "
  .repeat(4);

/** e0 is a vLLM engine; e1 and e2 are SGLang engines whose caches report 20 tokens. */
async function withCluster(
  test: (t: TestCluster) => Promise<void>,
  sglang = (i: number) => i > 0,
): Promise<void> {
  const t = await startTestCluster({
    model: { tokenizer: { path: "builtin:qwen3" } },
    engineOf: (i) =>
      sglang(i) ? { flavour: "sglang", cachedTokens: () => 20 } : { flavour: "vllm" },
    instanceOf: (i) => ({ engine: sglang(i) ? "sglang" : "vllm" }),
  });
  try {
    await test(t);
  } finally {
    await t.close();
  }
}

function generate(url: string, body: unknown): Promise<Response> {
  return fetch(`${url}/generate`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

/** The access log line of the request `id` (written when its body has ended). */
function accessLine(t: TestCluster, id: string | null): Promise<Record<string, unknown>> {
  return waitFor(
    () => t.logs.find((l) => l.message === "request" && l.fields?.requestId === id)?.fields,
    2_000,
    `the access log line of ${id}`,
  );
}

Deno.test("/generate with text goes to the SGLang engine holding its prefix, never to a vLLM one", async () => {
  await withCluster(async (t) => {
    const tokens = (await loadTokenizer("builtin:qwen3")).encode(TEXT, { addSpecialTokens: true });
    const chunks = Math.floor(tokens.length / CHUNK);
    assert(chunks >= 4, `a prompt of ${tokens.length} tokens`);
    t.hold(0, tokens, chunks); // the vLLM engine holds all of it: it cannot serve /generate
    t.hold(2, tokens, chunks - 1);
    const body = { text: TEXT, sampling_params: { max_new_tokens: 3, temperature: 0 } };
    const response = await generate(t.url, body);
    const answer = await response.json();
    assertEquals(response.status, 200, JSON.stringify(answer));
    assertEquals(response.headers.get("x-tidegate-instance"), "e2");
    assertEquals(response.headers.get("x-tidegate-prompt-tokens"), String(tokens.length));
    assertEquals(response.headers.get("x-tidegate-hit-tokens"), String((chunks - 1) * CHUNK));
    assertEquals(typeof answer.text, "string");
    assertEquals(answer.meta_info.completion_tokens, 3);
    const got = t.engines[2].stats.requests.at(-1)!;
    assertEquals(got.path, "/generate");
    assertEquals(got.body, body, "forwarded as sent");
    assertEquals(t.engines[0].stats.requests.length, 0);
    const line = await accessLine(t, response.headers.get("x-request-id"));
    assertEquals(line.endpoint, "generate");
    assertEquals(line.attempts, 1, "the vLLM engine was not tried first");
    assertEquals(line.engineCachedTokens, 20, "usage read from meta_info");
  });
});

Deno.test("/generate batches of token ids are routed by their shared prefix; streamed items pass through", async () => {
  await withCluster(async (t) => {
    const shared = range(1000, 5 * CHUNK);
    t.hold(1, shared, 5);
    const input_ids = [[...shared, 1, 2, 3], [...shared, 7, 8]];
    const response = await generate(t.url, {
      input_ids,
      sampling_params: { max_new_tokens: 2 },
      stream: true,
      rid: ["first", "second"],
    });
    const text = await response.text();
    assertEquals(response.status, 200, text);
    assertEquals(response.headers.get("x-tidegate-instance"), "e1");
    assertEquals(response.headers.get("x-tidegate-hit-tokens"), String(5 * CHUNK));
    assertEquals(response.headers.get("x-tidegate-prompt-tokens"), String(83 + 82));
    const events = text.split("\n\n").filter((e) => e.startsWith("data: {"))
      .map((e) => JSON.parse(e.slice(6)));
    assertEquals(new Set(events.map((e) => e.meta_info.id)), new Set(["first", "second"]));
    assertEquals(new Set(events.map((e) => e.index)), new Set([0, 1]));
    assert(text.trimEnd().endsWith("data: [DONE]"), text);
    const line = await accessLine(t, response.headers.get("x-request-id"));
    assertEquals(line.engineCachedTokens, 20, "both items' meta_info summed (10 + 10)");
  });
});

Deno.test("/generate refusals: no prompt, a bad prompt, an unknown model, a model without SGLang engines", async () => {
  await withCluster(async (t) => {
    const cases: [unknown, number, string][] = [
      [{ sampling_params: {} }, 400, "Either text, input_ids or input_embeds"],
      [{ text: "a", input_ids: [1] }, 400, "Either text, input_ids or input_embeds"],
      [{ input_ids: [1, -2] }, 400, "'input_ids[1]'"],
      [{ text: 5 }, 400, "'text'"],
      [{ text: "a", sampling_params: { n: 0 } }, 400, "'sampling_params.n'"],
      [{ text: "a", model: "nope" }, 404, "nope"],
    ];
    for (const [body, status, fragment] of cases) {
      const response = await generate(t.url, body);
      const answer = await response.json();
      assertEquals(response.status, status, JSON.stringify(answer));
      assert(answer.error.message.includes(fragment), answer.error.message);
    }
    assertEquals(t.engines.flatMap((e) => e.stats.requests).length, 0, "none reached an engine");
  });
  await withCluster(async (t) => {
    const response = await generate(t.url, { text: "a" });
    const answer = await response.json();
    assertEquals(response.status, 404, JSON.stringify(answer));
    assertEquals(answer.error.code, "route_not_served");
  }, () => false);
});

Deno.test("an engine's own /generate refusal reaches the client as SGLang sent it", async () => {
  await withCluster(async (t) => {
    // Duplicate rids are SGLang's to judge: the router passes the request on.
    const response = await generate(t.url, { text: ["a", "b"], rid: ["x", "x"] });
    const answer = await response.json();
    assertEquals(response.status, 400);
    assert(answer.error.message.startsWith("Duplicate request IDs"), answer.error.message);
  });
});

Deno.test("a large /generate body of token ids is parsed off the main loop and routed by them", async () => {
  await withCluster(async (t) => {
    const ids = range(3, 70_000);
    t.hold(2, ids, 8);
    const response = await generate(t.url, {
      input_ids: ids,
      sampling_params: { max_new_tokens: 1 },
    });
    const answer = await response.json();
    assertEquals(response.status, 200, JSON.stringify(answer).slice(0, 300));
    assertEquals(response.headers.get("x-tidegate-instance"), "e2");
    assertEquals(response.headers.get("x-tidegate-hit-tokens"), String(8 * CHUNK));
    const got = t.engines[2].stats.requests.at(-1)!;
    assertEquals((got.body?.input_ids as number[]).length, ids.length);
  });
});

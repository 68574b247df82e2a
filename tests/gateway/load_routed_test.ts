/**
 * Pooling and utility routes through the router (src/openai/endpoints.ts): routed by load to an
 * instance of the model, body forwarded as received, the engine's own answers and refusals passed
 * through, and an instance that answers 404 for a route skipped for it afterwards. The fake
 * engines serve and refuse these routes as vLLM's server does (src/fakes/fake_utility_routes.ts).
 */
import OpenAI from "openai";
import { assert, assertEquals, assertMatch, assertRejects } from "../assert.ts";
import { type FakeEngine, startFakeEngine } from "../../src/fakes/fake_engine.ts";
import type { RequestRecord } from "../../src/contracts.ts";
import { LOAD_ROUTED_PATHS } from "../../src/openai/endpoints.ts";
import { loadOnlyModel, startRouter } from "../support/harness.ts";

const MODEL = "pool-model";

function post(url: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** A body each route's engine handler accepts. */
const BODIES: Record<string, Record<string, unknown>> = {
  "/v1/embeddings": { model: MODEL, input: ["a cat", "a dog"] },
  "/pooling": { model: MODEL, input: "a cat" },
  "/classify": { model: MODEL, input: ["good", "bad"] },
  "/score": { model: MODEL, text_1: "cat", text_2: ["a cat", "a car"] },
  "/v1/score": { model: MODEL, queries: "cat", documents: ["a cat", "a car"] },
  "/rerank": { model: MODEL, query: "cat", documents: ["a cat", "a car"], top_n: 1 },
  "/v1/rerank": { model: MODEL, query: "cat", documents: ["a cat", "a car"] },
  "/v2/rerank": { model: MODEL, query: "cat", documents: ["a cat", "a car"] },
  "/tokenize": { model: MODEL, prompt: "Hello there" },
  "/detokenize": { model: MODEL, tokens: [1, 2, 3] },
};

async function withCluster(
  runners: ("generate" | "embed" | "classify")[],
  test: (ctx: {
    url: string;
    engines: FakeEngine[];
    records: RequestRecord[];
    breakerStates: () => string[];
  }) => Promise<void>,
  extra: Record<string, unknown> = {},
  models: Record<string, unknown>[] = [],
): Promise<void> {
  const engines = runners.map((runner, i) =>
    startFakeEngine({ id: `e${i}`, model: MODEL, runner })
  );
  const records: RequestRecord[] = [];
  const { router, url } = await startRouter([
    loadOnlyModel(MODEL, {
      policy: "round_robin",
      instances: engines.map((e, i) => ({ id: `e${i}`, url: e.url })),
      ...extra,
    }),
    ...models,
  ], { observers: [{ onFinished: (r) => records.push(r) }] });
  try {
    const breakerStates = () =>
      engines.map((_, i) => router.registry.runtime(MODEL)!.cluster.get(`e${i}`)!.breaker.state);
    await test({ url, engines, records, breakerStates });
  } finally {
    await router.close();
    await Promise.all(engines.map((e) => e.close()));
  }
}

Deno.test("every pooling and utility route reaches an engine that serves it, body as sent, answer as given", async () => {
  await withCluster(["embed", "classify"], async ({ url, engines, records }) => {
    // count_tokens is Anthropic's, served by generative models (anthropic_messages_e2e_test.ts).
    const paths = Object.values(LOAD_ROUTED_PATHS).flat()
      .filter((path) => path !== "/v1/messages/count_tokens");
    assertEquals(paths.length, Object.keys(BODIES).length, "a body for every route");
    for (const path of paths) {
      // Key order and spacing of their own: what the engine gets must be these bytes.
      const sent = JSON.stringify(BODIES[path], null, 1);
      const response = await post(url, path, sent);
      const text = await response.text();
      assertEquals(response.status, 200, `${path}: ${text}`);
      assert(response.headers.get("x-request-id"), `${path}: x-request-id`);
      const answered = records.at(-1)!;
      assertEquals(answered.status, 200);
      const engine = engines.find((e) => e.id === answered.instanceId)!;
      const got = engine.stats.requests.at(-1)!;
      assertEquals(got.path, path);
      assertEquals(got.body, JSON.parse(sent));
      assertEquals(got.requestId, response.headers.get("x-request-id"));
    }
    const byPath = new Map(records.map((r) => [r.endpoint, r]));
    for (const name of Object.keys(LOAD_ROUTED_PATHS)) {
      if (name !== "count_tokens") assert(byPath.has(name as never), name);
    }
    const embeddings = await (await post(url, "/v1/embeddings", BODIES["/v1/embeddings"])).json();
    assertEquals(embeddings.object, "list");
    assertEquals(embeddings.data.length, 2);
    assertEquals(embeddings.data[0].object, "embedding");
    const rerank = await (await post(url, "/rerank", BODIES["/rerank"])).json();
    assertEquals(rerank.results.length, 1, "top_n reached the engine");
  });
});

Deno.test("an instance that answers 404 for a route is skipped for it from then on; others still get it", async () => {
  await withCluster(["generate", "embed", "generate"], async ({ url, records }) => {
    for (let i = 0; i < 9; i++) {
      const response = await post(url, "/v1/embeddings", BODIES["/v1/embeddings"]);
      assertEquals(response.status, 200, await response.text());
    }
    const notServed = records.flatMap((r) => r.attempts).filter((a) => a.failure === "not_served");
    assertEquals(
      notServed.map((a) => a.instanceId).sort(),
      ["e0", "e2"],
      "each generative instance was asked once",
    );
    assert(records.every((r) => r.instanceId === "e1"));
    // The generative instances still take what they serve.
    for (let i = 0; i < 3; i++) {
      const response = await post(url, "/tokenize", BODIES["/tokenize"]);
      assertEquals(response.status, 200);
    }
    const tokenizedOn = new Set(
      records.filter((r) => r.endpoint === "tokenize").map((r) => r.instanceId),
    );
    assertEquals(tokenizedOn, new Set(["e0", "e1", "e2"]));
  });
});

Deno.test("when no instance serves a route the client gets a 404 in OpenAI's shape, then without asking again", async () => {
  await withCluster(["generate", "generate"], async ({ url, records, breakerStates }) => {
    const first = await post(url, "/v1/embeddings", BODIES["/v1/embeddings"]);
    assertEquals(first.status, 404);
    const error = (await first.json()).error;
    assertEquals(error.code, "route_not_served");
    assertMatch(error.message, /pool-model.*\/v1\/embeddings/);
    assertEquals(records[0].attempts.length, 2);
    const second = await post(url, "/v1/embeddings", BODIES["/v1/embeddings"]);
    assertEquals(second.status, 404);
    assertEquals((await second.json()).error.code, "route_not_served");
    assertEquals(records[1].attempts.length, 0, "known not to serve it: nobody asked");
    assertEquals(breakerStates(), ["closed", "closed"], "a 404 is no failure of the engine");
  });
});

Deno.test("a load-routed body without model goes to the only model; with several models it is a 400", async () => {
  await withCluster(["embed"], async ({ url }) => {
    const response = await post(url, "/v1/embeddings", { input: "a cat" });
    assertEquals(response.status, 200, await response.text());
  });
  await withCluster(
    ["embed"],
    async ({ url }) => {
      const response = await post(url, "/v1/embeddings", { input: "a cat" });
      assertEquals(response.status, 400);
      const error = (await response.json()).error;
      assertEquals(error.code, "missing_required_parameter");
      assertEquals(error.param, "model");
      const unknown = await post(url, "/v1/embeddings", { model: "nope", input: "a cat" });
      assertEquals(unknown.status, 404);
      assertEquals((await unknown.json()).error.code, "model_not_found");
      const typed = await post(url, "/tokenize", { model: 7, prompt: "x" });
      assertEquals(typed.status, 400);
      assertEquals((await typed.json()).error.param, "model");
      const notJson = await post(url, "/tokenize", "{not json");
      assertEquals(notJson.status, 400);
      assertEquals((await notJson.json()).error.code, "invalid_json");
    },
    {},
    [loadOnlyModel("other", { instances: [{ id: "o", url: "http://127.0.0.1:9" }] })],
  );
});

Deno.test("the engine's refusal of a load-routed body passes through as it gave it", async () => {
  await withCluster(["embed"], async ({ url, records }) => {
    const response = await post(url, "/v1/embeddings", { model: MODEL });
    assertEquals(response.status, 400);
    const error = (await response.json()).error;
    assertEquals(error.type, "BadRequestError");
    assertEquals(error.param, "input");
    assertEquals(records[0].outcome, "upstream_error_status");
    assertEquals(records[0].attempts.length, 1);
  });
});

Deno.test("a load-routed request is retried on another instance after a 5xx, and counted in the metrics", async () => {
  await withCluster(["embed", "embed"], async ({ url, engines, records }) => {
    await engines[0].setFailure("http500", { allEndpoints: false });
    for (let i = 0; i < 4; i++) {
      const response = await post(url, "/v1/embeddings", BODIES["/v1/embeddings"]);
      assertEquals(response.status, 200, await response.text());
    }
    assert(records.some((r) => r.attempts.some((a) => a.failure === "http_5xx")));
    assert(records.every((r) => r.instanceId === "e1"));
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assertMatch(metrics, /tidegate_requests_total\{[^}]*endpoint="embeddings"[^}]*\} 4/);
  });
});

Deno.test("a large load-routed body (parsed off the main loop) reaches the engine whole", async () => {
  await withCluster(["embed"], async ({ url, engines }) => {
    const input = "a cat sat on the mat. ".repeat(20_000); // 440 KB: past the inline-parse size
    const response = await post(url, "/v1/embeddings", { model: MODEL, input });
    assertEquals(response.status, 200, await response.text());
    assertEquals(engines[0].stats.requests.at(-1)!.body?.input, input);
  });
});

Deno.test("OpenAI's SDK parses the router's embeddings and its errors on load-routed routes", async () => {
  await withCluster(["embed"], async ({ url }) => {
    const client = new OpenAI({ apiKey: "unused", baseURL: `${url}/v1`, maxRetries: 0 });
    const embeddings = await client.embeddings.create({ model: MODEL, input: ["a", "b"] });
    assertEquals(embeddings.data.length, 2);
    assert(embeddings.data[0].embedding.length > 0);
    assert(embeddings.usage.prompt_tokens > 0);
    const unknown = await assertRejects(
      () => client.embeddings.create({ model: "nope", input: "a" }),
      OpenAI.NotFoundError,
    );
    assertEquals(unknown.code, "model_not_found");
  });
  await withCluster(["generate"], async ({ url }) => {
    const client = new OpenAI({ apiKey: "unused", baseURL: `${url}/v1`, maxRetries: 0 });
    const missing = await assertRejects(
      () => client.embeddings.create({ model: MODEL, input: "a" }),
      OpenAI.NotFoundError,
    );
    assertEquals(missing.code, "route_not_served");
  });
});

/**
 * The pooling and utility routes through the router in front of real vLLM engines: a generative
 * one and a pooling one (the tiny Qwen3 served with `--runner pooling --convert embed`) under one
 * model name. Embeddings, pooling, score and rerank reach the pooling engine; the generative one
 * answers vLLM's own 404 for them, once, and is skipped after; /tokenize, which both serve, gives
 * the router's own tokens.
 */
import { assert, assertEquals } from "../assert.ts";
import { createRouter, type Router } from "../../routes/app.ts";
import { resolveConfig } from "../../src/config/load.ts";
import type { RequestRecord } from "../../src/contracts.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import { REAL } from "./real_env.ts";
import { startVllm, type VllmEngine } from "./vllm_engine.ts";

async function post(url: string, body: Record<string, unknown>) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: REAL.modelName, ...body }),
  });
  return { status: response.status, json: await response.json() };
}

Deno.test("real vLLM: pooling routes find the pooling engine, a generative one's 404 is learnt once, /tokenize gives the router's tokens", async () => {
  const engines: VllmEngine[] = [];
  let router: Router | undefined;
  const records: RequestRecord[] = [];
  try {
    engines.push(
      ...await Promise.all([
        startVllm({ startTimeoutMs: 600_000 }),
        startVllm({ args: ["--runner", "pooling", "--convert", "embed"], startTimeoutMs: 600_000 }),
      ]),
    );
    router = await createRouter(
      resolveConfig({
        listen: { port: 0 },
        models: [{
          name: REAL.modelName,
          tokenizer: { path: REAL.model },
          kv: { store: "none" },
          policy: "round_robin",
          health: { intervalMs: 1_000, timeoutMs: 2_000 },
          instances: [{ id: "generate", url: engines[0].url }, {
            id: "pooling",
            url: engines[1].url,
          }],
        }],
      }),
      { log: () => {}, observers: [{ onFinished: (r) => records.push(r) }] },
    );
    const { port } = await router.serve({ port: 0 });
    const url = `http://127.0.0.1:${port}`;

    for (let i = 0; i < 4; i++) {
      const { status, json } = await post(`${url}/v1/embeddings`, { input: ["a cat", "a dog"] });
      assertEquals(status, 200, JSON.stringify(json));
      assertEquals(json.data.length, 2);
      assert(json.data[0].embedding.length > 0);
    }
    const notServed = records.flatMap((r) => r.attempts).filter((a) => a.failure === "not_served");
    assert(notServed.length <= 1, `asked the generative engine ${notServed.length} times`);
    assert(notServed.every((a) => a.instanceId === "generate"));
    assert(records.every((r) => r.instanceId === "pooling"));

    const score = await post(`${url}/score`, { text_1: "cat", text_2: ["a cat", "a car"] });
    assertEquals(score.status, 200, JSON.stringify(score.json));
    assertEquals(score.json.data.length, 2);
    const rerank = await post(`${url}/rerank`, { query: "cat", documents: ["a cat", "a car"] });
    assertEquals(rerank.status, 200, JSON.stringify(rerank.json));
    assertEquals(rerank.json.results.length, 2);
    const pooling = await post(`${url}/pooling`, { input: "a cat" });
    assertEquals(pooling.status, 200, JSON.stringify(pooling.json));

    // The engine's own refusal passes through, in its own words.
    const refused = await post(`${url}/v1/embeddings`, {});
    assertEquals(refused.status, 400);
    assert(String(refused.json.error.message).includes("input"));

    const tokenizer = await loadTokenizer(REAL.model);
    const prompt = "The router and the engine count the same tokens.";
    const answeredBy = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const { status, json } = await post(`${url}/tokenize`, { prompt });
      assertEquals(status, 200, JSON.stringify(json));
      assertEquals(json.tokens, tokenizer.encode(prompt, { addSpecialTokens: true }));
      answeredBy.add(records.at(-1)!.instanceId!);
    }
    assertEquals(answeredBy, new Set(["generate", "pooling"]), "both serve /tokenize");
  } finally {
    await router?.close();
    await Promise.all(engines.map((e) => e.stop()));
  }
});

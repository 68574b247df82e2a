import { assert, assertEquals, assertMatch } from "../assert.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import { CHUNK, completion, MODEL, range, startTestCluster } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";

const scheme = createKeyScheme({
  hash: "sha256_cbor",
  seed: "0",
  chunkSize: 16,
  keyFormat: "llumnix",
});

Deno.test("a LoRA model name and cache_salt change the keys the router looks up, as vLLM's extra_keys do", async () => {
  const path = "/models/support-lora-v2";
  const t = await startTestCluster({
    model: { loras: [{ name: "support-bot", adapter: "support-lora-v2", path }] },
    engine: { loraModules: ["support-bot"] },
  });
  try {
    const prompt = range(500, 48);
    t.hold(0, prompt, 3); // the base model's KV: useless to the adapter
    const lora = await completion(t.url, { model: "support-bot", prompt });
    assertEquals(lora.status, 200);
    await lora.body?.cancel();
    assertEquals(lora.headers.get("x-tidegate-hit-tokens"), "0");
    assertEquals(
      [...t.master.requests.at(-1)!.keys].sort(),
      scheme.keys(prompt, { loraName: "support-lora-v2", loraPath: path }).sort(),
    );

    const salted = await completion(t.url, { prompt, cache_salt: "tenant-7" });
    await salted.body?.cancel();
    assertEquals(
      [...t.master.requests.at(-1)!.keys].sort(),
      scheme.keys(prompt, { cacheSalt: "tenant-7" }).sort(),
    );
    const engine = t.engines.find((e) => e.id === lora.headers.get("x-tidegate-instance"))!;
    assertEquals(
      engine.stats.requests[0].body?.model,
      "support-bot",
      "the model name reaches the engine unchanged",
    );
  } finally {
    await t.close();
  }
});

Deno.test("a LoRA without its path is dispatched by load under tagged extra keys, and keyed under plain", async () => {
  for (const extraKeys of ["tagged", "plain"] as const) {
    const t = await startTestCluster({
      model: { loras: [{ name: "support-bot", adapter: "support-lora-v2" }] },
      kv: { extraKeys },
      engine: { loraModules: ["support-bot"] },
    });
    try {
      const prompt = range(500, 48);
      const response = await completion(t.url, { model: "support-bot", prompt });
      assertEquals(response.status, 200, extraKeys);
      await response.body?.cancel();
      if (extraKeys === "tagged") {
        assertEquals(t.master.count, 0, "vLLM 0.31+ hashes the path: no keys without it");
      } else {
        const plain = createKeyScheme({ ...scheme.options, extraKeys: "plain" });
        assertEquals(
          [...t.master.requests.at(-1)!.keys].sort(),
          plain.keys(prompt, { loraName: "support-lora-v2" }).sort(),
        );
      }
    } finally {
      await t.close();
    }
  }
});

Deno.test("when the tokenizer fails the request is still served by load, and the failure is counted", async () => {
  // Engine mode, and every engine's /tokenize answers 500: every tokenize call fails.
  const t = await startTestCluster({ model: { tokenizer: { mode: "engine", timeoutMs: 200 } } });
  try {
    for (const engine of t.engines) await engine.setFailure("http500", { paths: ["/tokenize"] });
    for (let i = 0; i < 3; i++) {
      const response = await completion(t.url, { prompt: `hello ${i}` });
      assertEquals(response.status, 200);
      await response.body?.cancel();
    }
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assertMatch(metrics, /tidegate_tokenizer_failures_total\{model="test-model"\} 3/);
    const logged = t.logs.filter((l) => l.message.includes("dispatched by load only"));
    assertEquals(logged.length, 1, "logged once per outage, not per request");
    assertEquals(t.master.count, 0, "no tokens, no keys, no store lookup");
  } finally {
    await t.close();
  }
});

Deno.test("a chat the local template rejects is forwarded by load, and the engine's answer returned", async () => {
  const t = await startTestCluster({ model: { tokenizer: { path: "builtin:qwen3" } } });
  try {
    const response = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        max_tokens: 2,
        messages: [{
          role: "user",
          content: [{ type: "image_url", image_url: { url: "data:," } }],
        }],
      }),
    });
    assertEquals(response.status, 200);
    await response.body?.cancel();
    assert(response.headers.get("x-tidegate-instance"));
    assertEquals(response.headers.get("x-tidegate-hit-tokens"), "0");
  } finally {
    await t.close();
  }
});

Deno.test("mooncake_ttft runs in the live router: it predicts TTFT and plans a pool transfer when it pays", async () => {
  const t = await startTestCluster({ model: { policy: "mooncake_ttft" } });
  try {
    const prompt = range(7_000, 160); // 10 chunks
    t.hold(1, prompt, 10);
    const busy = t.router.registry.runtime(MODEL)!.cluster.account.lease("e1", 400_000); // e1 queues minutes of work
    const response = await completion(t.url, { prompt });
    assertEquals(response.status, 200);
    await response.body?.cancel();
    const [decision] = t.router.decisions.recent(1);
    assertEquals(decision.policy, "mooncake_ttft");
    assert(decision.predictedTtftS !== null && decision.predictedTtftS > 0);
    // e1 holds the prefix but is swamped: another instance loads it from the pool instead.
    assert(decision.chosen !== "e1", `chose ${decision.chosen}`);
    const chosen = decision.candidates.find((c) => c.id === decision.chosen)!;
    assert(chosen.terms.transferS > 0, JSON.stringify(chosen.terms));
    busy.release();
  } finally {
    await t.close();
  }
});

Deno.test("a completions batch is routed by the prefix all its prompts share, its load counting every prompt", async () => {
  const t = await startTestCluster();
  try {
    const shared = range(1000, 4 * CHUNK);
    const lists = [
      [...shared, ...range(1, 2 * CHUNK)],
      [...shared, ...range(500, 3)],
      [...shared, ...range(900, CHUNK + 5)],
    ];
    t.hold(1, lists[0], 6); // the first prompt's own six chunks: only four serve every prompt
    const response = await completion(t.url, { prompt: lists });
    assertEquals(response.status, 200);
    await response.body?.cancel();
    assertEquals(response.headers.get("x-tidegate-instance"), "e1");
    assertEquals(response.headers.get("x-tidegate-hit-tokens"), String(4 * CHUNK));
    const sum = lists.reduce((n, l) => n + l.length, 0);
    assertEquals(response.headers.get("x-tidegate-prompt-tokens"), String(sum));
    assertEquals(
      [...t.master.requests.at(-1)!.keys],
      t.keys(shared),
      "only the shared prefix is looked up",
    );
  } finally {
    await t.close();
  }
});

Deno.test("a request asking n samples counts n decodes on its instance while it streams, none after", async () => {
  // One token per 0.05 s of engine time at timeScale 1: the stream lasts long enough to look.
  const t = await startTestCluster({
    engines: 1,
    engine: { timeScale: 1, decodeSecondsPerToken: 0.05 },
  });
  try {
    const account = t.router.registry.runtime(MODEL)!.cluster.account;
    const response = await completion(t.url, {
      prompt: range(1, 40),
      n: 3,
      max_tokens: 40,
      stream: true,
    });
    assertEquals(response.status, 200);
    const reader = response.body!.getReader();
    await reader.read(); // the first token has arrived: the request decodes
    assertEquals(account.load("e0").decodeRequests, 3);
    await reader.cancel();
    await eventually(() => account.load("e0").decodeRequests === 0, 2_000, "every decode back");
  } finally {
    await t.close();
  }
});

/**
 * Hits: tidegate (`cache_aware`) in front of two real vLLM engines that write their KV into a real
 * mooncake_master (MooncakeStoreConnector): for follow-ups sharing a prefix, the hit the router
 * predicts (`x-tidegate-hit-tokens`) is the engine's own `cached_tokens` on at least 95% of them,
 * and the live agreement classifier says `agree`; with a wrong seed it says `blind`.
 */
import { assert, assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { createRouter, type Router } from "../../routes/app.ts";
import { eventually } from "../support/eventually.ts";
import { MooncakeClient } from "../../src/kv/mooncake_client.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import type { ChatMessage } from "../../src/tokenize/types.ts";
import { type RealMaster, startRealMaster } from "./mooncake_master.ts";
import { REAL } from "./real_env.ts";
import { CPU_BLOCK_SIZE, startVllm, type VllmEngine } from "./vllm_engine.ts";

const HOSTS = ["127.0.0.2", "127.0.0.3"];

function routerConfig(master: RealMaster, engines: VllmEngine[], seed?: string) {
  // With the wrong seed only the store can show it: the router's own predicted index (its recent
  // dispatches, under its own keys) agrees with itself until its entries expire.
  const predictedIndex = { enabled: seed === undefined };
  return resolveConfig({
    listen: { port: 0 },
    models: [{
      name: REAL.modelName,
      tokenizer: { path: REAL.model },
      kv: {
        store: "mooncake",
        url: master.url,
        hash: "sha256", // vLLM's default --prefix-caching-hash-algo
        ...(seed === undefined ? {} : { seed }),
        chunkSize: CPU_BLOCK_SIZE,
        keyFormat: "vllm-mooncake-store",
        keyParams: { model: REAL.model, group: 0 },
        minPromptTokens: CPU_BLOCK_SIZE,
        timeoutMs: 2_000,
        predictedIndex,
      },
      policy: "cache_aware",
      health: { intervalMs: 1_000, timeoutMs: 2_000 },
      instances: engines.map((e, i) => ({ id: `v${i}`, url: e.url, kvHost: HOSTS[i] })),
    }],
  });
}

/** A conversation's opening: a long system prompt (several blocks) every turn repeats. */
function document(n: number): string {
  return Array.from(
    { length: 120 },
    (_, i) => `Fact ${n}.${i}: item ${(i * 7 + n * 13) % 97} is ${i % 5}.`,
  )
    .join(" ");
}

interface Turn {
  requestId: string;
  predicted: number;
  cached: number;
  instance: string;
}

function messagesOf(doc: number, question: string): ChatMessage[] {
  return [{ role: "system", content: document(doc) }, { role: "user", content: question }];
}

async function chat(url: string, doc: number, question: string): Promise<Turn> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: REAL.modelName,
      max_tokens: 2,
      messages: messagesOf(doc, question),
    }),
  });
  const body = await response.json();
  if (response.status !== 200) throw new Error(`${response.status}: ${JSON.stringify(body)}`);
  return {
    requestId: response.headers.get("x-request-id")!,
    predicted: Number(response.headers.get("x-tidegate-hit-tokens")),
    cached: body.usage.prompt_tokens_details?.cached_tokens ?? 0,
    instance: response.headers.get("x-tidegate-instance")!,
  };
}

function agreement(router: Router): string[] {
  const runtime = router.registry.runtime(REAL.modelName)!;
  return runtime.cluster.entries().map((e) => runtime.agreement.state(e.config.id));
}

Deno.test("real vLLM + real mooncake_master: predicted hits equal the engines' cached_tokens; a wrong seed is seen as blind", async () => {
  const master = await startRealMaster();
  const engines: VllmEngine[] = [];
  let router: Router | undefined;
  try {
    engines.push(
      ...await Promise.all(
        HOSTS.map((kvHost) =>
          startVllm({ mooncakeMaster: master.rpcAddress, kvHost, startTimeoutMs: 600_000 })
        ),
      ),
    );
    router = await createRouter(routerConfig(master, engines), { log: () => {} });
    assert(await router.warm(), "tokenizer workers loaded");
    const { port } = await router.serve({ port: 0 });
    const url = `http://127.0.0.1:${port}`;
    const followUps: Turn[] = [];
    for (let doc = 0; doc < 4; doc++) await chat(url, doc, "Start.");
    // The engines wrote their KV under the keys the router computes for these chats.
    const runtime = router.registry.runtime(REAL.modelName)!;
    const tokenizer = await loadTokenizer(REAL.model);
    for (let doc = 0; doc < 4; doc++) {
      const tokens = tokenizer.encodeChat(messagesOf(doc, "Start."));
      const keys = runtime.keyScheme.keys(tokens);
      const found = await eventually(
        async () => {
          const { locations } = await new MooncakeClient({ url: master.url, deadlineMs: 2_000 })
            .lookup(keys);
          return keys.every((key) => locations.get(key)?.present);
        },
        10_000,
        `doc ${doc}'s ${keys.length} keys in the store`,
      ).then(() => true);
      assert(found && keys.length >= 5, `${keys.length} keys`);
    }
    for (let round = 0; round < 10; round++) {
      for (let doc = 0; doc < 4; doc++) {
        followUps.push(await chat(url, doc, `Question ${round} about document ${doc}?`));
      }
    }
    const agreeing = followUps.filter((t) => t.predicted === t.cached).length;
    console.log(
      `hits: ${agreeing}/${followUps.length} follow-ups predicted = cached_tokens; ` +
        `mean predicted ${
          Math.round(followUps.reduce((s, t) => s + t.predicted, 0) / followUps.length)
        } tokens`,
    );
    const misses = followUps.filter((t) => t.predicted !== t.cached);
    if (misses.length > 0) {
      // What the router saw for them: its store lookup and every candidate's terms.
      const seen = router.decisions.recent(200).filter((d) =>
        misses.some((m) => m.requestId === d.requestId)
      );
      console.log(`predicted != cached: ${JSON.stringify(misses)}\n${JSON.stringify(seen)}`);
    }
    assert(followUps.every((t) => t.cached > 0), "every follow-up reused its document");
    assert(agreeing >= 0.95 * followUps.length, JSON.stringify(followUps));
    await eventually(() => agreement(router!).includes("agree"), 10_000, "agree");

    // The same engines behind a router with the wrong seed: its keys are not the engines'.
    await router.close();
    router = await createRouter(routerConfig(master, engines, "wrong-seed"), { log: () => {} });
    assert(await router.warm());
    const wrong = await router.serve({ port: 0 });
    const wrongUrl = `http://127.0.0.1:${wrong.port}`;
    for (let round = 0; round < 4; round++) {
      for (let doc = 0; doc < 4; doc++) await chat(wrongUrl, doc, `Again ${round}?`);
    }
    await eventually(() => agreement(router!).includes("blind"), 10_000, "blind");
    assertEquals(followUps.length, 40);
  } finally {
    await router?.close();
    await Promise.all(engines.map((e) => e.stop()));
    await master.stop();
  }
});

/**
 * A poison request (one every engine answers with the same 5xx) is tried on two instances, not
 * on all, and charges no breaker, so a stream of them cannot take a healthy cluster down; an
 * engine whose 5xx another instance then serves is still charged.
 */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import { type OpenAiBody, roughTokenCount } from "../../src/fakes/fake_engine.ts";
import { type ChokingProxy, startChokingProxy } from "../fakes/choking_proxy.ts";
import { completion, MODEL, range, startTestCluster } from "../support/harness.ts";

/** The engines' 500 for a prompt their tokenizer chokes on: the same error on every engine. */
function chokesOnPoison(body: OpenAiBody): number {
  if (typeof body.prompt === "string" && body.prompt.startsWith("POISON")) {
    throw new Error("cannot tokenize this input");
  }
  return roughTokenCount(body);
}

Deno.test("poison requests are tried on two instances only and open no breaker, while legitimate requests are served", async () => {
  const t = await startTestCluster({ engines: 3, engine: { countTokens: chokesOnPoison } });
  try {
    const served = () => t.engines.reduce((sum, e) => sum + e.stats.requests.length, 0);
    for (let i = 0; i < 6; i++) {
      const before = served();
      const poison = await completion(t.url, { prompt: `POISON ${i}` });
      assertEquals(poison.status, 502);
      assertMatch((await poison.json()).error.message, /request itself is the likely cause/);
      assertEquals(served() - before, 2, "tried on two instances, not three");
      const legit = await completion(t.url, { prompt: range(1000 + i, 100) });
      assertEquals(legit.status, 200);
      await legit.body?.cancel();
    }
    const cluster = t.router.registry.runtime(MODEL)!.cluster;
    for (const engine of t.engines) {
      assertEquals(cluster.get(engine.id)!.breaker.snapshot().state, "closed", engine.id);
    }
  } finally {
    await t.close();
  }
});

Deno.test("an engine answering 5xx to requests another instance then serves is still charged and taken out", async () => {
  const t = await startTestCluster({ engines: 2 });
  try {
    await t.engines[0].setFailure("http500", { allEndpoints: false });
    const breaker = t.router.registry.runtime(MODEL)!.cluster.get("e0")!.breaker;
    for (let i = 0; i < 3; i++) {
      const prompt = range(1000 * (i + 1), 200);
      t.hold(0, prompt, 12); // e0 ranks first for this prompt
      const response = await completion(t.url, { prompt });
      assertEquals(response.status, 200);
      assertEquals(response.headers.get("x-tidegate-instance"), "e1");
      await response.body?.cancel();
    }
    assertEquals(breaker.snapshot().state, "open");
    assert(t.engines[0].stats.requests.length === 3, "tried first each time until it opened");
  } finally {
    await t.close();
  }
});

Deno.test("a request every engine drops the connection on is tried on two instances, opens no breaker, and valid requests are served", async () => {
  const proxies: ChokingProxy[] = [];
  const t = await startTestCluster({
    engines: 3,
    instanceUrl: (engine) => {
      proxies.push(startChokingProxy(Number(new URL(engine.url).port), "CHOKE"));
      return proxies.at(-1)!.url;
    },
  });
  try {
    for (let i = 0; i < 6; i++) {
      const poison = await completion(t.url, { prompt: `CHOKE ${i}` });
      assertEquals(poison.status, 502);
      assertMatch((await poison.json()).error.message, /closed the connection.*likely cause/);
      const legit = await completion(t.url, { prompt: range(2000 + i, 100) });
      assertEquals(legit.status, 200);
      await legit.body?.cancel();
    }
    assertEquals(proxies.reduce((sum, p) => sum + p.dropped, 0), 12, "two tries each");
    const cluster = t.router.registry.runtime(MODEL)!.cluster;
    for (const engine of t.engines) {
      assertEquals(cluster.get(engine.id)!.breaker.snapshot().state, "closed", engine.id);
    }
  } finally {
    await Promise.all(proxies.map((p) => p.close()));
    await t.close();
  }
});

Deno.test("an engine that drops a request another instance then serves is still charged", async () => {
  let choking: ChokingProxy | undefined;
  const t = await startTestCluster({
    engines: 2,
    instanceUrl: (engine, i) => {
      if (i > 0) return engine.url;
      choking = startChokingProxy(Number(new URL(engine.url).port), '"prompt"');
      return choking.url;
    },
  });
  try {
    const breaker = t.router.registry.runtime(MODEL)!.cluster.get("e0")!.breaker;
    for (let i = 0; i < 3; i++) {
      const prompt = range(3000 * (i + 1), 200);
      t.hold(0, prompt, 12); // e0 ranks first for this prompt
      const response = await completion(t.url, { prompt });
      assertEquals(response.status, 200);
      assertEquals(response.headers.get("x-tidegate-instance"), "e1");
      await response.body?.cancel();
    }
    assertEquals(breaker.snapshot().state, "open");
    assertEquals(breaker.snapshot().lastFailure?.kind, "connect");
  } finally {
    await choking?.close();
    await t.close();
  }
});

import { assert, assertEquals, assertMatch } from "../assert.ts";
import { completion, MODEL, range, startTestCluster } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";

const PROMPT = range(1000, 200); // 12 full chunks of 16

Deno.test("a prompt goes to the instance holding its longest local prefix", async () => {
  const t = await startTestCluster();
  try {
    t.hold(0, PROMPT, 4);
    t.hold(1, PROMPT, 12);
    const response = await completion(t.url, { prompt: PROMPT });
    assertEquals(response.status, 200);
    await response.body?.cancel();
    assertEquals(response.headers.get("x-tidegate-instance"), "e1");
    assertEquals(response.headers.get("x-tidegate-hit-tokens"), "192");
    assertEquals(response.headers.get("x-tidegate-prompt-tokens"), "200");
    assertEquals(t.engines[1].stats.requests.length, 1);
    assertEquals(t.master.count, 1, "one batch query for 12 keys");
  } finally {
    await t.close();
  }
});

Deno.test("a prefix counts only from chunk 0: a later run of cached chunks is no hit", async () => {
  const t = await startTestCluster();
  try {
    const keys = t.keys(PROMPT);
    for (const key of keys.slice(1)) t.master.put(key, `${t.kvHost(2)}:1`); // everything but chunk 0
    t.hold(0, PROMPT, 2);
    const response = await completion(t.url, { prompt: PROMPT });
    await response.body?.cancel();
    assertEquals(response.headers.get("x-tidegate-instance"), "e0");
  } finally {
    await t.close();
  }
});

Deno.test("with equal hits the less loaded instance wins", async () => {
  const t = await startTestCluster();
  try {
    // Load e0: a prompt only e0 holds, answered slowly so its prefill work stays in flight.
    const other = range(5000, 400);
    t.hold(0, other, 1);
    await t.engines[0].setFailure("slow_first_byte", { delayMs: 1500 });
    const busy = completion(t.url, { prompt: other });
    await eventually(() =>
      t.router.registry.runtime(MODEL)!.cluster.account.load("e0").prefillTokens > 0
    );
    // Equal hits on e0 and e1: the load decides.
    t.hold(0, PROMPT, 6);
    t.hold(1, PROMPT, 6);
    const response = await completion(t.url, { prompt: PROMPT });
    await response.body?.cancel();
    assertEquals(response.headers.get("x-tidegate-instance"), "e1");
    await t.engines[0].setFailure("none");
    await (await busy).body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("a refused connection and a 5xx are retried on the next-best instances", async () => {
  const t = await startTestCluster();
  try {
    t.hold(0, PROMPT, 12);
    t.hold(1, PROMPT, 8);
    await t.engines[0].setFailure("refuse");
    await t.engines[1].setFailure("http500");
    const response = await completion(t.url, { prompt: PROMPT });
    assertEquals(response.status, 200);
    await response.body?.cancel();
    assertEquals(response.headers.get("x-tidegate-instance"), "e2");
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assertMatch(
      metrics,
      /tidegate_upstream_retries_total\{model="test-model",instance="e0",reason="connect_error"\} 1/,
    );
    assertMatch(
      metrics,
      /tidegate_upstream_retries_total\{model="test-model",instance="e1",reason="http_5xx"\} 1/,
    );
  } finally {
    await t.close();
  }
});

Deno.test("an instance failing three times in a row is taken out until /health passes again", async () => {
  const t = await startTestCluster({
    model: { health: { intervalMs: 60_000, timeoutMs: 300, openCooldownMs: 60_000 } },
  });
  try {
    const cluster = t.router.registry.runtime(MODEL)!.cluster;
    // Three prompts only e0 holds: e0 is each one's first choice, and each attempt is refused.
    const prompts = [0, 1, 2].map((i) => range(20_000 + 1000 * i, 64));
    for (const prompt of prompts) t.hold(0, prompt, 4);
    t.hold(0, PROMPT, 12);
    await t.engines[0].setFailure("refuse");
    for (const prompt of prompts) {
      const response = await completion(t.url, { prompt });
      assertEquals(response.status, 200);
      await response.body?.cancel();
    }
    assertEquals(cluster.get("e0")!.breaker.state, "open");
    const before = t.engines[0].stats.requests.length;
    await t.engines[0].setFailure("none");
    const response = await completion(t.url, { prompt: PROMPT });
    await response.body?.cancel();
    assert(
      response.headers.get("x-tidegate-instance") !== "e0",
      "an open instance gets no traffic",
    );
    assertEquals(t.engines[0].stats.requests.length, before);
    await cluster.refresh(); // a passing probe lets it back (half-open, then closed)
    const fresh = range(30_000, 64); // held by e0 only (PROMPT's follower went elsewhere)
    t.hold(0, fresh, 4);
    const back = await completion(t.url, { prompt: fresh });
    await back.body?.cancel();
    assertEquals(back.headers.get("x-tidegate-instance"), "e0");
  } finally {
    await t.close();
  }
});

Deno.test("a hanging store costs at most its deadline per request, then is skipped", async () => {
  // 300 ms: a timer this machine fires more than 150 ms late would excuse the store (the router
  // was busy, src/kv/mooncake_client.ts), which a loaded test machine must not trigger.
  const t = await startTestCluster({ kv: { timeoutMs: 300 } });
  try {
    t.master.setDelayMs(5_000);
    await t.master.setMode("slow");
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      const response = await completion(t.url, { prompt: range(i * 1000, 200) });
      assertEquals(response.status, 200);
      await response.body?.cancel();
      const elapsed = performance.now() - started;
      assert(elapsed < 300 + 300, `request ${i} took ${elapsed.toFixed(0)} ms`);
    }
    const queried = t.master.count;
    const response = await completion(t.url, { prompt: range(9000, 200) });
    assertEquals(response.status, 200);
    await response.body?.cancel();
    assertEquals(t.master.count, queried, "the store is in its down-window: not queried");
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assertMatch(metrics, /tidegate_store_down\{model="test-model"\} 1/);
    assertMatch(
      metrics,
      /tidegate_store_lookups_total\{model="test-model",outcome="store_down"\} 1/,
    );
  } finally {
    await t.master.setMode("ok");
    await t.close();
  }
});

Deno.test("streams pass through with the instance and request id headers, and traceparent reaches the engine", async () => {
  const t = await startTestCluster();
  try {
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const response = await completion(t.url, { prompt: PROMPT, stream: true }, {
      traceparent,
      "x-request-id": "req-42",
      connection: "keep-alive, x-drop-me",
      "x-drop-me": "1",
      "x-keep-me": "2",
    });
    assertEquals(response.status, 200);
    assertMatch(response.headers.get("content-type") ?? "", /text\/event-stream/);
    assertEquals(response.headers.get("x-request-id"), "req-42");
    const instance = response.headers.get("x-tidegate-instance")!;
    const text = await response.text();
    assertMatch(text, /^data: \{/);
    assert(text.trimEnd().endsWith("data: [DONE]"), text.slice(-80));
    const engine = t.engines.find((e) => e.id === instance)!;
    const seen = engine.stats.requests.at(-1)!;
    assertEquals(seen.traceparent, traceparent);
    assertEquals(seen.requestId, "req-42");
    assertEquals(seen.headers["x-keep-me"], "2");
    assertEquals(seen.headers["x-drop-me"], undefined);
  } finally {
    await t.close();
  }
});

Deno.test("the router's header namespace is its own: client x-tidegate-* never reach the engine, the engine's server banner never reaches the client", async () => {
  const t = await startTestCluster();
  try {
    const response = await completion(t.url, { prompt: PROMPT }, {
      "x-tidegate-instance": "spoofed",
      "x-tidegate-prefill-instance": "spoofed",
      "x-keep-me": "2",
    });
    assertEquals(response.status, 200);
    await response.text();
    const instance = response.headers.get("x-tidegate-instance")!;
    assert(instance !== "spoofed");
    assertEquals(response.headers.get("server"), null);
    const seen = t.engines.find((e) => e.id === instance)!.stats.requests.at(-1)!;
    assertEquals(Object.keys(seen.headers).filter((h) => h.startsWith("x-tidegate-")), []);
    assertEquals(seen.headers["x-keep-me"], "2");
  } finally {
    await t.close();
  }
});

Deno.test("every lease is released exactly once: on completion, client abort and mid-stream failure", async () => {
  const t = await startTestCluster({ engine: { decodeSecondsPerToken: 0.05, timeScale: 1 } });
  try {
    const account = t.router.registry.runtime(MODEL)!.cluster.account;
    const idle = () =>
      t.engines.every((e) => {
        const load = account.load(e.id);
        return load.prefillTokens === 0 && load.prefillRequests === 0 && load.decodeRequests === 0;
      });
    // Completion.
    await (await completion(t.url, { prompt: range(1, 40), max_tokens: 2 })).text();
    await eventually(idle, 2_000, "release after completion");
    // Client abort mid-stream.
    const aborted = await completion(t.url, { prompt: range(1, 40), stream: true, max_tokens: 50 });
    const reader = aborted.body!.getReader();
    await reader.read();
    await reader.cancel();
    await eventually(idle, 2_000, "release after client abort");
    // The engine dies mid-stream: the client gets an error event, the lease is released.
    for (const engine of t.engines) await engine.setFailure("midstream");
    const broken = await completion(t.url, { prompt: range(1, 40), stream: true, max_tokens: 50 });
    const text = await broken.text();
    assertMatch(text, /"code":"upstream_stream_failed"/);
    await eventually(idle, 2_000, "release after mid-stream failure");
  } finally {
    await t.close();
  }
});

Deno.test("a client that leaves before the first byte: the engine's request is cancelled and the lease released", async () => {
  const t = await startTestCluster({ engines: 1, engine: { slowFirstByteMs: 30_000 } });
  try {
    const account = t.router.registry.runtime(MODEL)!.cluster.account;
    await t.engines[0].setFailure("slow_first_byte");
    const client = new AbortController();
    const pending = fetch(`${t.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, prompt: range(1, 40), max_tokens: 5 }),
      signal: client.signal,
    }).catch((error) => error);
    await eventually(() => account.load("e0").prefillRequests === 1, 5_000, "dispatched");
    // The lease is taken at the decision, before the request is sent: wait until the engine has it.
    await eventually(() => t.engines[0].stats.requests.length === 1, 5_000, "the engine has it");
    client.abort();
    await pending;
    await eventually(
      () => t.engines[0].stats.byOutcome.client_abort === 1,
      5_000,
      () => `the engine's request cancelled: ${JSON.stringify(t.engines[0].stats.byOutcome)}`,
    );
    await eventually(() => account.load("e0").prefillRequests === 0, 5_000, "lease released");
    assertEquals(account.load("e0").decodeRequests, 0);
  } finally {
    await t.close();
  }
});

Deno.test("bad input gets OpenAI-shaped 400s, 404 and 413", async () => {
  const t = await startTestCluster({ top: { limits: { maxBodyBytes: 2048 } } });
  try {
    const post = (path: string, body: string) =>
      fetch(`${t.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
    const cases: [string, string, number, string | null][] = [
      ["/v1/completions", "{nope", 400, null],
      ["/v1/chat/completions", JSON.stringify({ model: MODEL, messages: [] }), 400, "messages"],
      [
        "/v1/completions",
        JSON.stringify({ model: MODEL, prompt: "x", max_tokens: -1 }),
        400,
        "max_tokens",
      ],
      ["/v1/completions", JSON.stringify({ model: "nope", prompt: "x" }), 404, "model"],
      ["/v1/completions", JSON.stringify({ model: MODEL, prompt: "x".repeat(4096) }), 413, null],
    ];
    for (const [path, body, status, param] of cases) {
      const response = await post(path, body);
      assertEquals(response.status, status, body.slice(0, 40));
      const json = await response.json();
      assertEquals(Object.keys(json.error).sort(), ["code", "message", "param", "type"]);
      assertEquals(json.error.param, param);
      assert(json.error.message.length > 0);
    }
    // A client's model name never becomes a metric label (unbounded series).
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assert(!metrics.includes('model="nope"'));
    assertMatch(metrics, /tidegate_requests_total\{model="unknown",[^}]*status="404"\} 1/);
    const notFound = await fetch(`${t.url}/v2/nothing`);
    assertEquals(notFound.status, 404);
    assertEquals((await notFound.json()).error.code, "not_found");
    assertEquals((await fetch(`${t.url}/healthz`)).status, 200);
  } finally {
    await t.close();
  }
});

Deno.test("upstream failures map to 502, 503 and 504", async () => {
  const t = await startTestCluster({ top: { limits: { upstreamHeadersTimeoutMs: 150 } } });
  try {
    for (const engine of t.engines) await engine.setFailure("http500");
    const bad = await completion(t.url, { prompt: PROMPT });
    assertEquals(bad.status, 502);
    assertEquals((await bad.json()).error.code, "upstream_unavailable");

    for (const engine of t.engines) await engine.setFailure("hang");
    const started = performance.now();
    const slow = await completion(t.url, { prompt: PROMPT });
    assertEquals(slow.status, 504);
    assertEquals((await slow.json()).error.code, "upstream_timeout");
    assert(performance.now() - started < 3 * 150 + 500);

    for (const engine of t.engines) {
      await engine.setFailure("none");
      engine.setReady(false);
    }
    await t.router.registry.runtime(MODEL)!.cluster.refresh();
    const none = await completion(t.url, { prompt: PROMPT });
    assertEquals(none.status, 503);
    assertEquals((await none.json()).error.code, "no_healthy_instance");
    assertEquals((await fetch(`${t.url}/readyz`)).status, 503);
  } finally {
    await t.close();
  }
});

Deno.test("admission answers 429 with Retry-After when the predicted TTFT breaks the SLO", async () => {
  const t = await startTestCluster({ model: { slo: { ttftS: 0.000001, admission: true } } });
  try {
    const response = await completion(t.url, { prompt: PROMPT });
    assertEquals(response.status, 429);
    assert(Number(response.headers.get("retry-after")) >= 1);
    const json = await response.json();
    assertEquals(json.error.code, "ttft_slo");
    assertMatch(json.error.message, /exceeds the TTFT SLO/);
    assertEquals(t.engines.reduce((n, e) => n + e.stats.requests.length, 0), 0);
  } finally {
    await t.close();
  }
});

Deno.test("GET /v1/models lists the model", async () => {
  const t = await startTestCluster();
  try {
    const json = await (await fetch(`${t.url}/v1/models`)).json();
    assertEquals(json.object, "list");
    assertEquals(json.data.map((m: { id: string }) => m.id), [MODEL]);
  } finally {
    await t.close();
  }
});

import assert from "node:assert/strict";
import { CircuitBreaker } from "../../src/cluster/circuit_breaker.ts";
import { HealthProber, type ProbeResult } from "../../src/cluster/health_prober.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { ManualTime, settle } from "./manual_time.ts";
import { TEST_HEALTH, testCluster, testInstance } from "./test_cluster.ts";

Deno.test("the prober takes an engine that goes down out of service and brings it back", async () => {
  const engine = startFakeEngine({ id: "e" });
  const now = () => performance.now();
  const b = new CircuitBreaker({
    now,
    failureThreshold: 3,
    successThreshold: 2,
    coolDownMs: 60_000,
  });
  const prober = new HealthProber({
    targets: () => [{ id: "e", url: engine.url }],
    fetch,
    now,
    timeoutMs: 200,
    onResult: (result) => b.recordProbe(result),
  });
  try {
    const [first] = await prober.probeOnce();
    assert.equal(first.outcome, "healthy");
    assert.equal(first.status, 200);
    assert.equal(b.state, "closed");

    await engine.setFailure("refuse");
    for (let i = 0; i < 3; i++) {
      const [down] = await prober.probeOnce();
      assert.equal(down.outcome, "failed");
      assert.equal(down.failure, "connect");
    }
    assert.equal(b.state, "open");
    assert.equal(b.available, false);

    await engine.setFailure("none");
    await prober.probeOnce();
    assert.equal(b.state, "half_open");
    await prober.probeOnce();
    assert.equal(b.state, "closed");
    assert.equal(prober.stats.probes, 6);
    assert.equal(prober.stats.failures, 3);
    const stats = prober.stats.byInstance.get("e")!;
    assert.equal(stats.failures, 3);
    assert.equal(stats.consecutiveFailures, 0);
  } finally {
    await engine.close();
  }
});

Deno.test("the prober classifies 503, 500 and a hung /health", async () => {
  const starting = startFakeEngine({ ready: false });
  const broken = startFakeEngine();
  const hung = startFakeEngine();
  try {
    await broken.setFailure("http500");
    await hung.setFailure("hang");
    const prober = new HealthProber({
      targets: () => [
        { id: "starting", url: starting.url },
        { id: "broken", url: broken.url },
        { id: "hung", url: hung.url },
      ],
      fetch,
      now: () => performance.now(),
      timeoutMs: 60,
      onResult: () => {},
    });
    const started = performance.now();
    const results = await prober.probeOnce();
    const byId = Object.fromEntries(results.map((r) => [r.instanceId, r]));
    assert.equal(byId.starting.outcome, "starting");
    assert.equal(byId.starting.status, 503);
    assert.equal(byId.broken.outcome, "failed");
    assert.equal(byId.broken.failure, "http_5xx");
    assert.equal(byId.hung.outcome, "failed");
    assert.equal(byId.hung.failure, "timeout");
    assert.ok(byId.hung.latencyMs >= 55);
    assert.ok(performance.now() - started < 200, "probes run concurrently");
    assert.equal(prober.stats.failures, 2, "a 503 is an answer, not a probe failure");
  } finally {
    await starting.close();
    await broken.close();
    await hung.close();
  }
});

Deno.test("a starting engine is kept out of service until its /health passes", async () => {
  const engine = startFakeEngine({ ready: false });
  const b = new CircuitBreaker({ now: () => performance.now(), initialState: "starting" });
  const prober = new HealthProber({
    targets: () => [{ id: "e", url: engine.url }],
    fetch,
    now: () => performance.now(),
    onResult: (r) => b.recordProbe(r),
  });
  try {
    await prober.probeOnce();
    await prober.probeOnce();
    assert.equal(b.state, "starting");
    assert.equal(b.tryAcquire(), undefined);
    engine.setReady(true);
    await prober.probeOnce();
    assert.equal(b.state, "closed");
  } finally {
    await engine.close();
  }
});

Deno.test("start() probes every interval until stop()", async () => {
  const time = new ManualTime(0);
  const results: ProbeResult[] = [];
  const prober = new HealthProber({
    targets: () => [{ id: "a", url: "http://a" }, { id: "b", url: "http://b" }],
    fetch: (input) =>
      String(input) === "http://a/health"
        ? Promise.resolve(new Response(null, { status: 204 }))
        : Promise.reject(new TypeError("connection refused")),
    now: time.now,
    timers: time,
    intervalMs: 1000,
    timeoutMs: 100,
    onResult: (r) => results.push(r),
  });
  prober.start();
  await settle();
  assert.equal(results.length, 2);
  await time.advance(1000);
  await time.advance(1000);
  assert.equal(results.length, 6);
  assert.deepEqual(
    results.slice(0, 2).map((r) => [r.instanceId, r.outcome, r.failure]).sort(),
    [["a", "healthy", undefined], ["b", "failed", "connect"]],
  );
  await prober.stop();
  await time.advance(5000);
  assert.equal(results.length, 6);
  assert.equal(prober.stats.byInstance.get("b")?.consecutiveFailures, 3);
  assert.equal(time.pendingTimers, 0, "no timer left behind");
});

Deno.test("a model cluster probes vLLM and SGLang at /health and a plain OpenAI server at /v1/models", async () => {
  const paths: string[] = [];
  const cluster = testCluster({
    health: { ...TEST_HEALTH, failuresToOpen: 1, successesToClose: 1 },
    fetch: (input) => {
      const url = new URL(String(input));
      paths.push(`${url.host}${url.pathname}`);
      // A hosted OpenAI-compatible API knows no /health.
      const known = !(url.hostname === "api.example" && url.pathname === "/health");
      return Promise.resolve(new Response("{}", { status: known ? 200 : 404 }));
    },
  });
  cluster.upsert(testInstance("v"), "config");
  cluster.upsert(testInstance("s", { url: "http://s:30000", engine: "sglang" }), "config");
  cluster.upsert(testInstance("o", { url: "https://api.example:443", engine: "openai" }), "config");
  await cluster.refresh();
  const probed = paths.filter((p) => !p.endsWith("/metrics") && !p.endsWith("/get_load")).sort();
  assert.deepEqual(probed, ["s:30000/health", "v:8000/health", "api.example/v1/models"].sort());
  assert.ok(cluster.entries().every((e) => cluster.isHealthy(e)));
});

import { assert, assertEquals } from "../assert.ts";
import type { AttemptRecord } from "../../src/proxy/forward.ts";
import { startFakeEngine } from "../fakes/fake_engine.ts";
import { startKillableProxy } from "../fakes/killable_proxy.ts";
import { eventually, loadOnlyModel, startRouter } from "./harness.ts";
import { sleep, steadyLoad } from "./steady_load.ts";

const MODEL = "failover-model";
const PROBE_INTERVAL_MS = 250;

Deno.test("a killed engine loses its traffic within one probe interval, no request fails, and it returns once healthy", async () => {
  const engines = [0, 1, 2].map((i) =>
    startFakeEngine({ id: `e${i}`, model: MODEL, timeScale: 0.002, decodeSecondsPerToken: 0.5 })
  );
  const proxies = engines.map((e) => startKillableProxy(e.port));
  const attempts: AttemptRecord[] = [];
  const { router, url } = await startRouter([loadOnlyModel(MODEL, {
    policy: "least_load",
    health: {
      intervalMs: PROBE_INTERVAL_MS,
      timeoutMs: 150,
      failuresToOpen: 3,
      successesToClose: 2,
      openCooldownMs: 2_000,
    },
    instances: proxies.map((p, i) => ({ id: `e${i}`, url: p.url })),
  })], { observers: [{ onFinished: (r) => attempts.push(...r.attempts) }] });
  const load = steadyLoad(url, { model: MODEL, workers: 6 });
  const onE0 = (from: number, to = Infinity) =>
    attempts.filter((a) => a.instanceId === "e0" && a.startedAt >= from && a.startedAt < to);
  try {
    await sleep(300);
    assert(onE0(0).length > 0, "e0 served before the kill");

    const killedAt = performance.now();
    proxies[0].kill();
    await sleep(3 * PROBE_INTERVAL_MS);
    const breaker = router.gateway.runtime(MODEL)!.cluster.get("e0")!.breaker;
    assertEquals(breaker.state, "open");
    const late = onE0(killedAt + PROBE_INTERVAL_MS);
    assertEquals(late.length, 0, "no attempt on the dead engine after one probe interval");
    const tried = onE0(killedAt);
    assert(tried.every((a) => a.failure !== undefined), "every attempt since the kill failed");

    const revivedAt = performance.now();
    proxies[0].revive();
    await eventually(
      () => onE0(revivedAt).some((a) => a.status === 200),
      3_000,
      "e0 to serve again",
    );
    const back = onE0(revivedAt).find((a) => a.status === 200)!;
    const returnMs = back.startedAt - revivedAt;
    assert(returnMs < 3 * PROBE_INTERVAL_MS, `back after ${returnMs.toFixed(0)} ms`);
    await sleep(200);
  } finally {
    await load.stop();
    await router.close();
    for (const proxy of proxies) await proxy.close();
    await Promise.all(engines.map((e) => e.close()));
  }
  const failed = load.results.filter((r) => r.status !== 200);
  assertEquals(failed, [], "every client request succeeded (retries covered the dead engine)");
  assert(load.results.length > 50, `${load.results.length} requests`);
});

Deno.test("an engine still loading at start (503 from /health) gets no traffic until it is healthy", async () => {
  const engines = [0, 1].map((i) =>
    startFakeEngine({ id: `e${i}`, model: MODEL, timeScale: 0.001, ready: i === 0 })
  );
  const { router, url } = await startRouter([loadOnlyModel(MODEL, {
    policy: "round_robin",
    health: { intervalMs: 100, timeoutMs: 100 },
    instances: engines.map((e) => ({ id: e.id, url: e.url })),
  })]);
  const cluster = router.gateway.runtime(MODEL)!.cluster;
  const load = steadyLoad(url, { model: MODEL, workers: 2 });
  try {
    await eventually(() => cluster.get("e1")!.breaker.state === "starting", 1_000, "starting");
    const before = engines[1].stats.requests.length;
    await sleep(300);
    assertEquals(engines[1].stats.requests.length, before, "nothing sent while it loads");
    engines[1].setReady(true);
    await eventually(() => engines[1].stats.served > 0, 1_000, "e1 to serve once healthy");
  } finally {
    await load.stop();
    await router.close();
    await Promise.all(engines.map((e) => e.close()));
  }
  assertEquals(load.results.filter((r) => r.status !== 200), []);
});

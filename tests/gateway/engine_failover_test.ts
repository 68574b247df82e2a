/**
 * Failover under steady load. Every wait is on a condition (a breaker change, a number of probes
 * or of finished requests), and "within one probe interval" is counted in probes the router sent,
 * so the tests mean the same on an idle machine and on one whose cores are busy.
 */
import { assert, assertEquals } from "../assert.ts";
import type { AttemptRecord } from "../../src/proxy/forward.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { startKillableProxy } from "../fakes/killable_proxy.ts";
import { breakerTo, loadOnlyModel, recordTimeline, startRouter } from "../support/harness.ts";
import { eventually, waitFor } from "../support/eventually.ts";
import { steadyLoad } from "./steady_load.ts";

const MODEL = "failover-model";
const PROBE_INTERVAL_MS = 250;
/** How long a wait may take on a busy machine before the test gives up (not a timing bound). */
const PATIENCE_MS = 15_000;

Deno.test("a killed engine loses its traffic within one probe interval, no request fails, and it returns once healthy", async () => {
  const engines = [0, 1, 2].map((i) =>
    startFakeEngine({ id: `e${i}`, model: MODEL, timeScale: 0.002, decodeSecondsPerToken: 0.5 })
  );
  const proxies = engines.map((e) => startKillableProxy(e.port));
  const timeline = recordTimeline(Object.fromEntries(proxies.map((p, i) => [`e${i}`, p.url])));
  const attempts: AttemptRecord[] = [];
  const { router, url } = await startRouter([loadOnlyModel(MODEL, {
    policy: "least_load",
    health: {
      intervalMs: PROBE_INTERVAL_MS,
      // A dead engine refuses connections at once: the deadline only has to spare live engines
      // whose answers are slow because the machine is busy.
      timeoutMs: 2_000,
      failuresToOpen: 3,
      successesToClose: 2,
      // Longer than the whole test: only probes (never the cool-down) move this breaker.
      openCooldownMs: 60_000,
    },
    instances: proxies.map((p, i) => ({ id: `e${i}`, url: p.url })),
  })], {
    fetch: timeline.fetch,
    log: timeline.log,
    observers: [{ onFinished: (r) => attempts.push(...r.attempts) }],
  });
  const load = steadyLoad(url, { model: MODEL, workers: 6 });
  const onE0 = (from: number, to = Infinity) =>
    attempts.filter((a) => a.instanceId === "e0" && a.startedAt >= from && a.startedAt < to);
  const breaker = () => router.registry.runtime(MODEL)!.cluster.get("e0")!.breaker;
  try {
    await eventually(
      () => onE0(0).some((a) => a.status === 200),
      PATIENCE_MS,
      "e0 to serve before the kill",
    );

    const killed = timeline.mark("kill");
    const killedAt = performance.now();
    proxies[0].kill();
    const opened = await waitFor(
      () => timeline.find(breakerTo("e0", "open"), killed),
      PATIENCE_MS,
      "e0's breaker to open",
    );
    // Failed requests (retried elsewhere) open the breaker; waiting for `failuresToOpen` probes
    // would take three intervals. One probe may fail first if it happened to be due.
    const probesBeforeOpen = timeline.count("probe", "e0", killed, opened);
    assert(
      probesBeforeOpen <= 1,
      `${probesBeforeOpen} probes of e0 before its breaker opened: more than one probe interval`,
    );

    // Two more probe intervals of steady traffic with e0 dead, for the router to misroute.
    const finishedAtOpen = load.results.length;
    await eventually(
      () =>
        timeline.count("probe", "e0", opened) >= 2 && load.results.length >= finishedAtOpen + 30,
      PATIENCE_MS,
      "two probes of e0 and 30 requests after its breaker opened",
    );
    assertEquals(breaker().state, "open");
    const revived = timeline.mark("revive");
    const revivedAt = performance.now();
    assertEquals(
      timeline.count("inference", "e0", opened, revived),
      0,
      "no attempt on the dead engine once its breaker opened",
    );
    const tried = onE0(killedAt, revivedAt);
    assert(tried.every((a) => a.failure !== undefined), "every attempt since the kill failed");

    proxies[0].revive();
    await eventually(
      () => onE0(revivedAt).some((a) => a.status === 200),
      PATIENCE_MS,
      "e0 to serve again",
    );
    // Back after its first healthy probe (half-open trial) or its second (closed): counted in
    // probes, the bound of "within three probe intervals" holds however slow the machine is.
    const back = timeline.find((e) => e.kind === "inference" && e.instance === "e0", revived)!;
    const probesBeforeBack = timeline.count("probe", "e0", revived, back);
    assert(
      probesBeforeBack >= 1 && probesBeforeBack <= 2,
      `e0 took traffic again after ${probesBeforeBack} healthy probes (expected 1 or 2)`,
    );
    assert(
      timeline.between(revived, back).some(breakerTo("e0", "half_open")),
      "a healthy probe let e0 out of open before it took traffic",
    );

    // Steady traffic with e0 back, as before the kill.
    const finishedAtBack = load.results.length;
    await eventually(
      () => load.results.length >= Math.max(51, finishedAtBack + 20),
      PATIENCE_MS,
      "20 more requests with e0 back",
    );
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
  const timeline = recordTimeline(Object.fromEntries(engines.map((e) => [e.id, e.url])));
  const { router, url } = await startRouter([loadOnlyModel(MODEL, {
    policy: "round_robin",
    health: { intervalMs: 100, timeoutMs: 2_000 },
    instances: engines.map((e) => ({ id: e.id, url: e.url })),
  })], { fetch: timeline.fetch, log: timeline.log });
  const cluster = router.registry.runtime(MODEL)!.cluster;
  const load = steadyLoad(url, { model: MODEL, workers: 2 });
  try {
    const starting = await waitFor(
      () => timeline.find(breakerTo("e1", "starting")),
      PATIENCE_MS,
      "e1 to be starting",
    );
    // Three probes that find it still loading, with traffic flowing meanwhile.
    const served = engines[0].stats.served;
    await eventually(
      () => timeline.count("probe", "e1", starting) >= 3 && engines[0].stats.served >= served + 10,
      PATIENCE_MS,
      "three probes of the loading e1 and 10 requests served by e0",
    );
    assertEquals(cluster.get("e1")!.breaker.state, "starting");
    const ready = timeline.mark("ready");
    assertEquals(
      timeline.count("inference", "e1", starting, ready),
      0,
      "nothing sent while it loads",
    );
    engines[1].setReady(true);
    await eventually(() => engines[1].stats.served > 0, PATIENCE_MS, "e1 to serve once healthy");
    const closed = timeline.find(breakerTo("e1", "closed"), ready);
    const firstSent = timeline.find((e) => e.kind === "inference" && e.instance === "e1", ready);
    assert(
      closed !== undefined && firstSent !== undefined && closed < firstSent,
      "e1 took traffic only after a healthy probe closed its breaker",
    );
  } finally {
    await load.stop();
    await router.close();
    await Promise.all(engines.map((e) => e.close()));
  }
  assertEquals(load.results.filter((r) => r.status !== 200), []);
});

import { assert, assertEquals } from "../assert.ts";
import { watchConfigFile } from "../../cli/start.ts";
import { loadConfigFile } from "../../src/config/load.ts";
import { createRouter, type Router } from "../../routes/app.ts";
import type { AttemptRecord } from "../../src/proxy/forward.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { eventually } from "../support/eventually.ts";
import { steadyLoad } from "./steady_load.ts";

const MODEL = "reload-model";
/** How long a wait may take on a busy machine before the test gives up (not a timing bound). */
const PATIENCE_MS = 15_000;

Deno.test("editing the config file adds and removes an instance under steady load with zero failed requests", async () => {
  // Engine seconds: ~200 ms per request, so requests are in flight on e0 when it is removed,
  // however slowly a loaded machine runs the load generator.
  const engines = [0, 1, 2].map((i) =>
    startFakeEngine({ id: `e${i}`, model: MODEL, timeScale: 0.04, decodeSecondsPerToken: 2 })
  );
  const dir = await Deno.makeTempDir();
  const path = `${dir}/tidegate.yaml`;
  const write = (ids: number[]) =>
    Deno.writeTextFile(
      path,
      [
        "listen: { port: 0 }",
        "models:",
        `  - name: ${MODEL}`,
        "    tokenizer: { mode: none }",
        "    kv: { store: none }",
        "    policy: least_load",
        // A generous deadline: the probe that admits e2 must not time out on a busy machine.
        "    health: { intervalMs: 5000, timeoutMs: 2000 }",
        "    instances:",
        ...ids.map((i) => `      - { id: e${i}, url: "${engines[i].url}" }`),
      ].join("\n"),
    );
  await write([0, 1]);
  let appliedAt = Infinity;
  let runningOnE0 = 0;
  const attempts: AttemptRecord[] = [];
  const router: Router = await createRouter(await loadConfigFile(path), {
    log: (message) => {
      if (message !== "config reloaded") return;
      appliedAt = performance.now();
      runningOnE0 = router.registry.runtime(MODEL)!.cluster.get("e0")?.active ?? 0;
    },
    observers: [{ onFinished: (r) => attempts.push(...r.attempts) }],
  });
  const watch = watchConfigFile({ path, router, debounceMs: 50, log: () => {} });
  const { port } = await router.serve({ port: 0 });
  const cluster = router.registry.runtime(MODEL)!.cluster;
  const load = steadyLoad(`http://127.0.0.1:${port}`, { model: MODEL, workers: 6, maxTokens: 3 });
  try {
    await eventually(
      () => load.results.length >= 20 && engines[0].stats.served > 0 && engines[1].stats.served > 0,
      PATIENCE_MS,
      "20 requests served by e0 and e1",
    );
    assertEquals(engines[2].stats.requests.length, 0, "e2 is not configured yet");
    await eventually(() => (cluster.get("e0")?.active ?? 0) > 0, PATIENCE_MS, "work on e0");
    await write([1, 2]);
    await eventually(() => appliedAt < Infinity, PATIENCE_MS, "the reload");
    await eventually(
      () => cluster.get("e0") === undefined,
      PATIENCE_MS,
      "e0 to drain and go",
    );
    // Steady traffic after the reload: 20 requests sent since, and e2's first answers.
    await eventually(
      () => {
        const since = load.results.filter((r) => r.startedAt > appliedAt);
        return since.length >= 20 && since.some((r) => r.instance === "e2");
      },
      PATIENCE_MS,
      "20 requests after the reload, some served by e2",
    );
    const results = await load.stop();

    assertEquals(results.filter((r) => r.status !== 200), [], "no failed request");
    assert(runningOnE0 > 0, "requests were running on e0 when it was removed");
    const sentToE0 = attempts.filter((a) => a.instanceId === "e0");
    assert(sentToE0.every((a) => a.startedAt < appliedAt), "no new request to e0");
    assert(
      engines[0].stats.requests.every((r) => r.outcome === "ok"),
      "e0's last requests finished normally",
    );
    const afterReload = results.filter((r) => r.startedAt > appliedAt);
    assert(afterReload.some((r) => r.instance === "e2"), "e2 takes traffic after the reload");
    assert(afterReload.every((r) => r.instance !== "e0"));
  } finally {
    await load.stop();
    await watch.close();
    await router.close();
    await Promise.all(engines.map((e) => e.close()));
    await Deno.remove(dir, { recursive: true });
  }
});

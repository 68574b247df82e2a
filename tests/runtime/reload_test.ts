import { assert, assertEquals, assertMatch } from "../assert.ts";
import { loadConfigFile, resolveConfig } from "../../src/config/load.ts";
import { planReload } from "../../src/runtime/reload.ts";
import { createRouter } from "../../routes/app.ts";
import { watchConfigFile } from "../../cli/start.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { completion, loadOnlyModel, MODEL, range, startTestCluster } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";

const model = (name: string, extra: Record<string, unknown> = {}) =>
  loadOnlyModel(name, { instances: [{ id: "a", url: "http://127.0.0.1:9" }], ...extra });

Deno.test("planReload() keeps a model whose only change is its members, and rebuilds on other changes", () => {
  const current = resolveConfig({ models: [model("m1"), model("m2"), model("m3")] });
  const next = resolveConfig({
    listen: { port: 9090, server: "deno" },
    limits: { maxBodyBytes: 1024, clientHeaderTimeoutMs: 5_000, maxConnections: 10 },
    models: [
      model("m1", {
        instances: [{ id: "b", url: "http://127.0.0.1:10" }],
        discovery: [{ name: "d", hostname: "x.svc", port: 80 }],
      }),
      model("m2", { kv: { store: "none", chunkSize: 16 } }),
      model("m4"),
    ],
  });
  const plan = planReload(current, next);
  assertEquals(plan.keep, ["m1"]);
  assertEquals(plan.rebuild, ["m2"]);
  assertEquals(plan.add, ["m4"]);
  assertEquals(plan.remove, ["m3"]);
  assertEquals(plan.needsRestart, [
    "listen: 127.0.0.1:8080 → 127.0.0.1:9090",
    "listen.server: node → deno",
    "limits.clientHeaderTimeoutMs: 30000 → 5000",
    "limits.maxConnections: 16384 → 10",
  ]);
  // Key order in the file does not matter.
  const reordered = resolveConfig({
    models: [{
      instances: [{ id: "c", url: "http://127.0.0.1:11" }],
      kv: { store: "none" },
      tokenizer: { mode: "none" },
      name: "m1",
    }],
  });
  assertEquals(planReload(current, reordered).keep, ["m1"]);
});

Deno.test("reload() changes membership in place: breakers and leases stay, new instances wait for /health, removed ones drain", async () => {
  const t = await startTestCluster({ engines: 3 });
  try {
    const runtime = t.router.registry.runtime(MODEL)!;
    const breaker = runtime.cluster.get("e1")!.breaker;
    const lease = runtime.cluster.account.lease("e1", 500);
    const busy = runtime.cluster.begin("e0");
    const base = t.router.config.models[0];
    // e0 leaves the file; the same engine comes back as e0b.
    const instances = [
      ...base.instances.filter((i) => i.id !== "e0"),
      { id: "e0b", url: t.engines[0].url },
    ];
    const result = await t.router.reload(resolveConfig({
      ...t.router.config,
      models: [{ ...base, instances }],
    }));
    assert(result.ok);
    assertEquals(result.membership, [{
      model: MODEL,
      added: ["e0b"],
      updated: [],
      removed: ["e0"],
    }]);
    assert(t.router.registry.runtime(MODEL) === runtime, "same runtime");
    assert(runtime.cluster.get("e1")!.breaker === breaker, "same breaker");
    assertEquals(runtime.cluster.account.load("e1").prefillTokens, 500, "lease untouched");
    assertEquals(runtime.cluster.get("e0b")!.breaker.state, "starting");
    assert(runtime.cluster.get("e0")!.draining, "removed: draining while busy");
    for (let i = 0; i < 3; i++) {
      const response = await completion(t.url, { prompt: range(50 * i, 32) });
      await response.body?.cancel();
      const instance = response.headers.get("x-tidegate-instance")!;
      assert(["e1", "e2"].includes(instance), `went to ${instance}`);
    }
    busy();
    assertEquals(runtime.cluster.get("e0"), undefined, "gone once idle");
    await runtime.cluster.refresh();
    assertEquals(runtime.cluster.get("e0b")!.breaker.state, "closed", "healthy probe");
    lease.release();
  } finally {
    await t.close();
  }
});

Deno.test("reload() rebuilds a model whose settings changed, adds and removes models", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const old = t.router.registry.runtime(MODEL)!;
    const base = t.router.config.models[0];
    const rebuilt = await t.router.reload(resolveConfig({
      ...t.router.config,
      models: [{ ...base, kv: { ...base.kv, chunkSize: 32 } }],
    }));
    assert(rebuilt.ok);
    assertEquals(rebuilt.plan.rebuild, [MODEL]);
    const fresh = t.router.registry.runtime(MODEL)!;
    assert(fresh !== old);
    assertEquals(fresh.config.kv.chunkSize, 32);
    const served = await completion(t.url, { prompt: range(1, 8), stream: true });
    assertEquals(served.status, 200);
    await served.text();
    assertEquals(fresh.cluster.get("e0")!.recentTtftS.length, 1, "the new runtime served it");

    const swapped = await t.router.reload(resolveConfig({
      ...t.router.config,
      models: [{ ...base, name: "other" }],
    }));
    assert(swapped.ok);
    assertEquals([swapped.plan.add, swapped.plan.remove], [["other"], [MODEL]]);
    const gone = await completion(t.url, { prompt: range(1, 8) });
    assertEquals(gone.status, 404);
    assertEquals((await gone.json()).error.code, "model_not_found");
    const routed = await completion(t.url, { model: "other", prompt: range(1, 8) });
    await routed.body?.cancel();
    assertEquals(routed.headers.get("x-tidegate-instance"), "e0", "dispatched by the new model");
  } finally {
    await t.close();
  }
});

Deno.test("reload() rejects a config it cannot build with the reasons and keeps the running one", async () => {
  const logs: { message: string; fields?: Record<string, unknown> }[] = [];
  const config = resolveConfig({ listen: { port: 0 }, models: [model("m1")] });
  const router = await createRouter(config, {
    background: false,
    log: (message, fields) => logs.push({ message, fields }),
  });
  try {
    // resolveConfig() refuses an unknown policy; a config built in code reaches reload().
    const withBadPolicy = structuredClone(resolveConfig({ models: [model("m1")] }));
    withBadPolicy.models[0].policy = "fastest";
    const badPolicy = await router.reload(withBadPolicy);
    assert(!badPolicy.ok);
    assertMatch(badPolicy.problems[0], /^models\[0\]\.policy: Unknown scheduling policy "fastest"/);
    const badTokenizer = await router.reload(resolveConfig({
      models: [model("m1"), model("m2", { tokenizer: { path: "/nonexistent/tokenizer" } })],
    }));
    assert(!badTokenizer.ok);
    assertMatch(badTokenizer.problems[0], /^models\[1\] \(m2\): /);
    assert(router.config === config, "the running config stays");
    assertEquals(router.registry.runtimes().map((r) => r.config.name), ["m1"]);
    assertEquals(
      logs.filter((l) => l.message === "config reload rejected, keeping the running config")
        .length,
      2,
    );
    const text = await router.metrics.text();
    assertMatch(text, /tidegate_config_reloads_total\{outcome="rejected"\} 2/);

    const moved = await router.reload(
      resolveConfig({ listen: { port: 9999 }, models: [model("m1")] }),
    );
    assert(moved.ok);
    assertEquals(moved.plan.needsRestart, ["listen: 127.0.0.1:0 → 127.0.0.1:9999"]);
    assert(
      logs.some((l) => l.message === "config reload: some changes need a restart to take effect"),
    );
  } finally {
    await router.close();
  }
});

Deno.test("watchConfigFile() reloads on a file change and on SIGHUP, and rejects an invalid file", async () => {
  const engine = startFakeEngine({ id: "a", model: "m1", timeScale: 0.001 });
  const dir = await Deno.makeTempDir();
  const path = `${dir}/tidegate.json`;
  const write = (instances: { id: string; url: string }[], extra: Record<string, unknown> = {}) =>
    Deno.writeTextFile(
      path,
      JSON.stringify({ listen: { port: 0 }, models: [model("m1", { instances, ...extra })] }),
    );
  await write([{ id: "a", url: engine.url }]);
  const logs: string[] = [];
  const log = (message: string) => logs.push(message);
  const router = await createRouter(await loadConfigFile(path), { background: false, log });
  const watch = watchConfigFile({ path, router, debounceMs: 30, log });
  const ids = () => router.registry.runtime("m1")!.cluster.entries().map((e) => e.config.id);
  try {
    await write([{ id: "a", url: engine.url }, { id: "b", url: engine.url }]);
    await eventually(() => ids().includes("b"), 3_000, "the file change to apply");

    await write([{ id: "a", url: engine.url }], { policy: "nope" });
    await eventually(
      () => logs.includes("config reload rejected, keeping the running config"),
      3_000,
      "the invalid file to be rejected",
    );
    assertEquals(ids(), ["a", "b"]);

    // SIGHUP re-reads the file as it is (here: valid again, without b).
    await write([{ id: "a", url: engine.url }]);
    Deno.kill(Deno.pid, "SIGHUP");
    await eventually(() => !ids().includes("b"), 3_000, "SIGHUP to reload");
    assert(logs.includes("config reloaded"));
  } finally {
    await watch.close();
    await router.close();
    await engine.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a rebuilding reload keeps the instances the admin API added and the drains it made", async () => {
  const t = await startTestCluster({ engines: 2 });
  try {
    const added = await fetch(`${t.url}/admin/instances`, {
      method: "POST",
      body: JSON.stringify({ model: MODEL, instance: { id: "extra", url: t.engines[1].url } }),
    });
    assertEquals(added.status, 201);
    await added.body?.cancel();
    const drained = await fetch(`${t.url}/admin/instances/${MODEL}/e0/drain`, { method: "POST" });
    assertEquals(drained.status, 200);
    await drained.body?.cancel();

    const base = t.router.config.models[0];
    const result = await t.router.reload(resolveConfig({
      ...t.router.config,
      models: [{ ...base, kv: { ...base.kv, chunkSize: 32 } }],
    }));
    assert(result.ok);
    assertEquals(result.plan.rebuild, [MODEL]);
    const cluster = t.router.registry.runtime(MODEL)!.cluster;
    assertEquals(cluster.get("extra")?.origin, "admin", "the admin-added instance is still there");
    assertEquals(cluster.get("e0")?.draining, true, "the drained instance stays drained");
    assertEquals(cluster.get("e1")?.draining, false);
    assert(
      t.logs.some((l) => l.message.startsWith("config reload: kept the admin API's changes")),
      "and the reload says so",
    );
  } finally {
    await t.close();
  }
});

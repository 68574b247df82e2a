import { assert, assertEquals } from "../assert.ts";
import type { ConnectionEnv } from "../../src/admin/auth.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { completion, MODEL, range, startTestCluster } from "../support/harness.ts";

const json = { "content-type": "application/json" };

Deno.test("GET /admin/instances shows health, breaker, load, the engine report with its age, and recent TTFT", async () => {
  const t = await startTestCluster({ engines: 2 });
  try {
    const cluster = t.router.registry.runtime(MODEL)!.cluster;
    await (await completion(t.url, { prompt: range(1, 64), stream: true })).text();
    await cluster.refresh();
    const response = await fetch(`${t.url}/admin/instances`);
    assertEquals(response.status, 200);
    const body = await response.json();
    assertEquals(body.models.length, 1);
    assertEquals(body.models[0].model, MODEL);
    const instances = body.models[0].instances;
    assertEquals(instances.map((i: { id: string }) => i.id), ["e0", "e1"]);
    for (const instance of instances) {
      assertEquals(instance.healthy, true);
      assertEquals(instance.breaker, "closed");
      assertEquals(instance.origin, "config");
      assertEquals(instance.engine, "vllm");
      assertEquals(typeof instance.load.waitingPrefillTokens, "number");
      const report = instance.engineReport;
      assertEquals([report.stale, report.lastError, report.consecutiveFailures], [false, null, 0]);
      assert(report.ageMs >= 0 && report.ageMs < 1_000, `age ${report.ageMs} ms`);
      assertEquals(report.report.waitingRequests, 0);
      assertEquals(report.report.runningRequests, 0);
    }
    const ttfts = instances.map((i: { recentTtftS: { count: number } }) => i.recentTtftS.count);
    assertEquals(ttfts.sort(), [0, 1]);
    const one = await fetch(`${t.url}/admin/instances?model=nope`);
    assertEquals(one.status, 404);
    assertEquals((await one.json()).error.code, "model_not_found");
  } finally {
    await t.close();
  }
});

Deno.test("POST /admin/instances adds an instance that takes traffic once its /health passes", async () => {
  const t = await startTestCluster({ engines: 1 });
  const extra = startFakeEngine({ id: "extra", model: MODEL, timeScale: 0.001 });
  const loading = startFakeEngine({ id: "loading", model: MODEL, ready: false });
  try {
    const add = (instance: unknown, model: string = MODEL) =>
      fetch(`${t.url}/admin/instances`, {
        method: "POST",
        headers: json,
        body: JSON.stringify({ model, instance }),
      });
    const added = await add({ id: "extra", url: extra.url, kvHost: "10.0.0.9" });
    assertEquals(added.status, 201);
    const body = await added.json();
    assertEquals(body.change, "added");
    assertEquals(body.instance.origin, "admin");
    assertEquals(body.instance.healthy, true, "probed before the answer");

    const starting = await add({ id: "loading", url: loading.url, engine: "sglang" });
    assertEquals(starting.status, 201);
    const view = (await starting.json()).instance;
    assertEquals([view.healthy, view.breaker], [false, "starting"]);

    // A prompt only "extra" holds goes there; "loading" gets nothing while it answers 503.
    const prompt = range(7000, 64);
    for (const key of t.keys(prompt)) t.master.put(key, "10.0.0.9:17000");
    const response = await completion(t.url, { prompt });
    await response.body?.cancel();
    assertEquals(response.headers.get("x-tidegate-instance"), "extra");
    assertEquals(loading.stats.requests.length, 0);

    const again = await add({ id: "extra", url: extra.url, kvHost: "10.0.0.9" });
    assertEquals([again.status, (await again.json()).change], [200, "unchanged"]);

    const bad = await add({ id: "bad id", url: "ftp://x", role: "leader", extra: 1 });
    assertEquals(bad.status, 400);
    const error = (await bad.json()).error;
    assertEquals(error.param, "instance");
    for (const field of ["instance.id", "instance.url", "instance.role", "instance.extra"]) {
      assert(error.message.includes(field), `${field} in: ${error.message}`);
    }
    assertEquals((await add({ id: "x", url: extra.url }, "nope")).status, 404);
    const garbage = await fetch(`${t.url}/admin/instances`, { method: "POST", body: "{" });
    assertEquals(garbage.status, 400);
  } finally {
    await t.close();
    await Promise.all([extra.close(), loading.close()]);
  }
});

Deno.test("drain stops new requests to an instance and DELETE forgets it once idle", async () => {
  const t = await startTestCluster({ engines: 2 });
  try {
    const cluster = t.router.registry.runtime(MODEL)!.cluster;
    const drained = await fetch(`${t.url}/admin/instances/${MODEL}/e0/drain`, { method: "POST" });
    assertEquals(drained.status, 200);
    assertEquals((await drained.json()).instance.draining, true);
    for (let i = 0; i < 4; i++) {
      const response = await completion(t.url, { prompt: range(100 * i, 32) });
      await response.body?.cancel();
      assertEquals(response.headers.get("x-tidegate-instance"), "e1");
    }

    const busy = cluster.begin("e1"); // a request still running there
    const removed = await fetch(`${t.url}/admin/instances/${MODEL}/e1`, { method: "DELETE" });
    assertEquals(removed.status, 200);
    assertEquals((await removed.json()).inFlight, 1);
    assert(cluster.get("e1"), "kept while a request runs");
    busy();
    assertEquals(cluster.get("e1"), undefined);

    const gone = await fetch(`${t.url}/admin/instances/${MODEL}/e1`, { method: "DELETE" });
    assertEquals(gone.status, 404);
    assertEquals((await gone.json()).error.code, "instance_not_found");
    const unknown = await fetch(`${t.url}/admin/instances/nope/e0/drain`, { method: "POST" });
    assertEquals(unknown.status, 404);
  } finally {
    await t.close();
  }
});

Deno.test("admin routes take model names with a slash URL-encoded, and aliases", async () => {
  const t = await startTestCluster({
    engines: 1,
    model: { name: "Qwen/Qwen3-8B", aliases: ["q"] },
  });
  try {
    const encoded = await fetch(`${t.url}/admin/instances/Qwen%2FQwen3-8B/e0/drain`, {
      method: "POST",
    });
    assertEquals(encoded.status, 200);
    assertEquals((await encoded.json()).model, "Qwen/Qwen3-8B");
    const alias = await fetch(`${t.url}/admin/instances?model=q`);
    assertEquals((await alias.json()).models[0].instances[0].draining, true);
  } finally {
    await t.close();
  }
});

Deno.test("the admin API behind a configured token: 401 without it, 200 with it; remote clients need it", async () => {
  const t = await startTestCluster({ engines: 1, top: { admin: { token: "s3cret" } } });
  try {
    const denied = await fetch(`${t.url}/admin/instances`);
    assertEquals(denied.status, 401);
    assertEquals((await denied.json()).error.type, "authentication_error");
    const allowed = await fetch(`${t.url}/admin/instances`, {
      headers: { authorization: "Bearer s3cret" },
    });
    assertEquals(allowed.status, 200);
    await allowed.body?.cancel();
  } finally {
    await t.close();
  }
  const open = await startTestCluster({ engines: 1 });
  try {
    const remote = { remoteAddr: { transport: "tcp", hostname: "10.2.3.4", port: 5555 } };
    const request = new Request("http://router/admin/instances");
    const answer = await open.router.app.fetch(request, remote);
    assertEquals(answer.status, 403);
    assertEquals((await answer.json()).error.code, "admin_loopback_only");
    assertEquals((await fetch(`${open.url}/admin/instances`)).status, 200, "loopback");
  } finally {
    await open.close();
  }
});

Deno.test("the router hands each route the client's address from the connection", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    t.router.app.get("/test-remote-addr", (c) => c.json((c.env as ConnectionEnv).remoteAddr));
    const addr = await (await fetch(`${t.url}/test-remote-addr`)).json();
    assertEquals([addr.transport, addr.hostname], ["tcp", "127.0.0.1"]);
  } finally {
    await t.close();
  }
});

Deno.test("an instance id over 128 characters is refused by the admin API and the config alike", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const response = await fetch(`${t.url}/admin/instances`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({
        model: MODEL,
        instance: { id: "i".repeat(20_000), url: t.engines[0].url },
      }),
    });
    assertEquals(response.status, 400);
    const error = (await response.json()).error;
    assert(error.message.includes("instance.id"), error.message);
    assert(error.message.length < 1_000, "the id is not echoed back whole");
    const ids = t.router.registry.runtime(MODEL)!.cluster.entries().map((e) => e.config.id);
    assertEquals(ids, ["e0"]);
    const atLimit = await fetch(`${t.url}/admin/instances`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({
        model: MODEL,
        instance: { id: "j".repeat(128), url: t.engines[0].url },
      }),
    });
    assertEquals(atLimit.status, 201);
    await atLimit.body?.cancel();
    const removed = await fetch(`${t.url}/admin/instances/${MODEL}/${"j".repeat(128)}`, {
      method: "DELETE",
    });
    assertEquals(removed.status, 200);
    await removed.body?.cancel();
  } finally {
    await t.close();
  }
});

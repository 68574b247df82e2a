/** Failures inside the router's own request path, and the answers around them. */
import { assert, assertEquals } from "../assert.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";
import type { RequestTrace, RequestTracer } from "../../src/contracts.ts";
import { ModelRegistry } from "../../src/runtime/model_registry.ts";
import { Gateway } from "../../src/gateway/gateway.ts";
import { ModelRuntime } from "../../src/runtime/model_runtime.ts";
import {
  completion,
  loadOnlyModel,
  MODEL,
  range,
  startRouter,
  startTestCluster,
} from "../support/harness.ts";

const quiet = () => {};

/** One model, token-id prompts, no store: every prompt's keys go to the predicted index. */
async function runtimeAndGateway(tracing: RequestTracer) {
  const config = resolveConfig({
    models: [loadOnlyModel("m", {
      kv: { store: "none", chunkSize: 4, minPromptTokens: 0 },
      instances: [{ id: "e0", url: "http://127.0.0.1:9" }],
    })],
  });
  const deps = {
    fetch: () => Promise.reject(new Error("no engine in this test")),
    now: () => performance.now(),
    wallNow: () => Date.now(),
    random: Math.random,
    log: quiet,
  };
  const runtime = await ModelRuntime.create(config.models[0], deps);
  const registry = new ModelRegistry(config, new Map([["m", runtime]]), deps.wallNow);
  const gateway = new Gateway(registry, deps, { tracing });
  return { runtime, gateway };
}

Deno.test("when anything throws after planning, the 500 gives the reservation back: no load, no predicted keys", async () => {
  const trace: RequestTrace = {
    planned: () => {
      throw new Error("tracing broke");
    },
    attempt: () => ({ run: (fn) => fn(), end: quiet }),
    finish: quiet,
  };
  const { runtime, gateway } = await runtimeAndGateway({ begin: () => trace });
  const body = new TextEncoder().encode(JSON.stringify({ model: "m", prompt: range(1, 64) }));
  const request = new Request("http://router/v1/completions", { method: "POST", body });
  const response = await gateway.handleInference("completions", request, body);
  assertEquals(response.status, 500);
  assertEquals((await response.json()).error.code, "internal_error");
  const load = runtime.cluster.account.load("e0");
  assertEquals([load.prefillTokens, load.prefillRequests], [0, 0], "the lease was released");
  assertEquals(runtime.predicted!.size, 0, "the predicted KV writes were forgotten");
});

Deno.test("with a TBT SLO and no healthy instance the answer is 503 no_healthy_instance, not a 429", async () => {
  const { router, url } = await startRouter([loadOnlyModel("m", {
    slo: { tbtS: 0.05, admission: true },
    health: { failuresToOpen: 1, intervalMs: 60_000 },
    instances: [{ id: "e0", url: "http://127.0.0.1:9" }],
  })], { background: false });
  try {
    router.registry.runtime("m")!.cluster.get("e0")!.breaker.recordFailure("probe", "connect");
    const response = await completion(url, { model: "m", prompt: [1, 2, 3] });
    assertEquals(response.status, 503);
    const { error } = await response.json();
    assertEquals(error.code, "no_healthy_instance");
    assert(!error.message.includes("Infinity"), error.message);
  } finally {
    await router.close();
  }
});

Deno.test("every answer carries x-request-id: unknown routes, admin errors and the client's own id", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const missing = await fetch(`${t.url}/no/such/route`);
    assertEquals(missing.status, 404);
    await missing.body?.cancel();
    assert(missing.headers.get("x-request-id"), "a 404 for an unknown route");
    const admin = await fetch(`${t.url}/admin/instances?model=nope`, {
      headers: { "x-request-id": "client-id-1" },
    });
    assertEquals(admin.status, 404);
    assertEquals((await admin.json()).error.code, "model_not_found");
    assertEquals(admin.headers.get("x-request-id"), "client-id-1");
    const served = await completion(t.url, { model: MODEL, prompt: range(1, 8) }, {
      "x-request-id": "client-id-2",
    });
    await served.body?.cancel();
    assertEquals(served.headers.get("x-request-id"), "client-id-2");
  } finally {
    await t.close();
  }
});

Deno.test("an admin body that is not JSON is a 400 in OpenAI's shape thrown from the route", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    for (
      const [method, path] of [["POST", "/admin/instances"], ["PUT", `/admin/experiments/${MODEL}`]]
    ) {
      const response = await fetch(`${t.url}${path}`, { method, body: "{not json" });
      assertEquals(response.status, 400, path);
      const { error } = await response.json();
      assertEquals([error.code, error.type], ["invalid_json", "invalid_request_error"], path);
    }
  } finally {
    await t.close();
  }
});

Deno.test("a LoRA or cache_salt request on a model whose hash has no extra keys is dispatched by load, not failed", async () => {
  const engine = startFakeEngine({
    id: "e0",
    model: "m",
    timeScale: 0.001,
    loraModules: ["m-lora"],
  });
  const { router, url } = await startRouter([loadOnlyModel("m", {
    loras: [{ name: "m-lora", adapter: "lora-1" }],
    kv: { store: "none", hash: "sha256_hex", chunkSize: 4, minPromptTokens: 0 },
    instances: [{ id: "e0", url: engine.url }],
  })], { background: false });
  try {
    for (const body of [{ model: "m-lora" }, { model: "m", cache_salt: "tenant-1" }]) {
      const response = await completion(url, { ...body, prompt: range(1, 16) });
      assertEquals(response.status, 200, JSON.stringify(body));
      await response.body?.cancel();
      assertEquals(response.headers.get("x-tidegate-instance"), "e0");
    }
  } finally {
    await router.close();
    await engine.close();
  }
});

Deno.test("a 400 is counted under the model the body names when the router serves it, else under unknown", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    for (const model of [MODEL, "not-served"]) {
      const response = await completion(t.url, { model, prompt: [1, 2], temperature: "hot" });
      assertEquals(response.status, 400);
      assertEquals((await response.json()).error.param, "temperature");
    }
    const samples = parsePrometheusText(await (await fetch(`${t.url}/metrics`)).text()).samples
      .filter((s) => s.name === "tidegate_requests_total" && s.labels.status === "400");
    assertEquals(
      samples.map((s) => [s.labels.model, s.value]).sort(),
      [[MODEL, 1], ["unknown", 1]],
    );
  } finally {
    await t.close();
  }
});

/**
 * LoRA-aware routing: the router reads each instance's `/v1/models` (vLLM lists adapters with
 * their `parent`), sends an adapter's requests only where it is loaded, lists the union in its own
 * `/v1/models`, and with `loraLoading` loads an adapter no instance holds on the instance the
 * policy picks. The fake engines list and load adapters as vLLM does.
 */
import { assert, assertEquals } from "../assert.ts";
import { type FakeEngine, startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { loadOnlyModel, startRouter } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import type { Router } from "../../routes/app.ts";

const BASE = "base-model";
const PATIENCE_MS = 15_000;

async function withRouter(
  loras: string[][],
  extra: Record<string, unknown>,
  test: (ctx: { url: string; engines: FakeEngine[]; router: Router }) => Promise<void>,
): Promise<void> {
  const engines = loras.map((loraModules, i) =>
    startFakeEngine({ id: `e${i}`, model: BASE, loraModules })
  );
  const { router, url } = await startRouter([loadOnlyModel(BASE, {
    policy: "round_robin",
    health: { intervalMs: 100, timeoutMs: 2_000 },
    // vLLM serves an adapter under its lora_name: clients send that name.
    loras: [{ name: "sql-lora", adapter: "sql-lora", path: "/adapters/sql-lora" }],
    instances: engines.map((e, i) => ({ id: `e${i}`, url: e.url })),
    ...extra,
  })]);
  try {
    await test({ url, engines, router });
  } finally {
    await router.close();
    await Promise.all(engines.map((e) => e.close()));
  }
}

async function complete(url: string, model: string): Promise<Response> {
  const response = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: "SELECT", max_tokens: 1 }),
  });
  await response.body?.cancel();
  return response;
}

Deno.test("an adapter's requests go only to the instances listing it; /v1/models lists the union", async () => {
  await withRouter([["sql-lora"], [], ["sql-lora", "chat-lora"]], {}, async ({ url, router }) => {
    const adapters = router.registry.runtime(BASE)!.adapters;
    await eventually(
      () => adapters.holders("sql-lora").length === 2 && adapters.holders("chat-lora").length === 1,
      PATIENCE_MS,
      "every instance's listing",
    );
    const served = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const response = await complete(url, "sql-lora");
      assertEquals(response.status, 200);
      served.add(response.headers.get("x-tidegate-instance")!);
    }
    assertEquals(served, new Set(["e0", "e2"]));
    // An adapter the config does not name is served where it is loaded, by its own name.
    for (let i = 0; i < 3; i++) {
      const response = await complete(url, "chat-lora");
      assertEquals(response.status, 200);
      assertEquals(response.headers.get("x-tidegate-instance"), "e2");
    }
    const models = await (await fetch(`${url}/v1/models`)).json();
    const ids = models.data.map((m: { id: string }) => m.id);
    for (const id of [BASE, "sql-lora", "chat-lora"]) assert(ids.includes(id), id);
    assertEquals(ids.length, 3, "each name once");
    const chat = models.data.find((m: { id: string }) => m.id === "chat-lora");
    assertEquals(chat.parent, BASE);
  });
});

Deno.test("with loraLoading an adapter no instance holds is loaded on the chosen one, then used there", async () => {
  await withRouter([[], []], { loraLoading: true }, async ({ url, engines, router }) => {
    const adapters = router.registry.runtime(BASE)!.adapters;
    await eventually(
      () => engines.every((e) => e.stats.modelListings > 0) && adapters.known,
      PATIENCE_MS,
      "the first listings",
    );
    const first = await complete(url, "sql-lora");
    assertEquals(first.status, 200);
    const holder = first.headers.get("x-tidegate-instance")!;
    const listed = async (engine: FakeEngine) =>
      (await (await fetch(`${engine.url}/v1/models`)).json()).data.map((m: { id: string }) => m.id);
    assert((await listed(engines.find((e) => e.id === holder)!)).includes("sql-lora"));
    for (let i = 0; i < 4; i++) {
      const response = await complete(url, "sql-lora");
      assertEquals(response.status, 200);
      assertEquals(response.headers.get("x-tidegate-instance"), holder, "where it was loaded");
    }
    const other = engines.find((e) => e.id !== holder)!;
    assert(!(await listed(other)).includes("sql-lora"), "loaded once, on one instance");
  });
});

Deno.test("without loraLoading an adapter nobody holds goes by the policy and the engine's 404 comes back", async () => {
  await withRouter([[], []], {}, async ({ url, engines, router }) => {
    await eventually(
      () =>
        engines.every((e) => e.stats.modelListings > 0) &&
        router.registry.runtime(BASE)!.adapters.known,
      PATIENCE_MS,
      "the first listings",
    );
    const response = await complete(url, "sql-lora");
    assertEquals(response.status, 404);
  });
});

Deno.test("the admin API lists, loads and unloads adapters across the pool", async () => {
  await withRouter([["sql-lora"], []], {}, async ({ url, engines, router }) => {
    const adapters = router.registry.runtime(BASE)!.adapters;
    await eventually(() => adapters.holders("sql-lora").length === 1, PATIENCE_MS, "a listing");
    const listed = await (await fetch(`${url}/admin/adapters?model=${BASE}`)).json();
    assertEquals(listed.models[0].adapters, [
      { name: "sql-lora", path: "/adapters/sql-lora", instances: ["e0"] },
    ]);
    const load = await fetch(`${url}/admin/adapters`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: BASE, name: "new-lora", path: "/adapters/new-lora" }),
    });
    assertEquals(load.status, 200);
    assertEquals((await load.json()).instances, [{ id: "e0", ok: true }, { id: "e1", ok: true }]);
    for (const engine of engines) {
      const ids = (await (await fetch(`${engine.url}/v1/models`)).json()).data.map((
        m: { id: string },
      ) => m.id);
      assert(ids.includes("new-lora"), engine.id);
    }
    const unload = await fetch(`${url}/admin/adapters/${BASE}/sql-lora`, { method: "DELETE" });
    assertEquals(unload.status, 200);
    assertEquals((await unload.json()).instances, [{ id: "e0", ok: true }]);
    assertEquals(adapters.holders("sql-lora"), []);
    const again = await fetch(`${url}/admin/adapters/${BASE}/sql-lora`, { method: "DELETE" });
    assertEquals(again.status, 404);
    await again.body?.cancel();
    const bad = await fetch(`${url}/admin/adapters`, { method: "POST", body: "{}" });
    assertEquals(bad.status, 400);
    await bad.body?.cancel();
  });
});

import { assert, assertEquals } from "../assert.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { MODEL, startTestCluster } from "../support/harness.ts";

const json = { "content-type": "application/json" };

function add(url: string, instance: Record<string, unknown>): Promise<Response> {
  return fetch(`${url}/admin/instances`, {
    method: "POST",
    headers: json,
    body: JSON.stringify({ model: MODEL, instance }),
  });
}

async function openAIError(response: Response) {
  const body = await response.json();
  assertEquals(Object.keys(body), ["error"]);
  assertEquals(typeof body.error.message, "string");
  return body.error as { message: string; type: string; param: string; code: string };
}

Deno.test("by default the admin API takes only the configured instances' hosts", async () => {
  const t = await startTestCluster({ engines: 1 });
  const extra = startFakeEngine({ id: "extra", model: MODEL, timeScale: 0.001 });
  try {
    const same = await add(t.url, { id: "extra", url: extra.url });
    assertEquals(same.status, 201, "127.0.0.1 is a configured instance's host");
    await same.body?.cancel();
    for (const url of ["http://169.254.169.254:80", "http://localhost:8000", "http://[::1]:80"]) {
      const refused = await add(t.url, { id: "elsewhere", url });
      assertEquals(refused.status, 400, url);
      const error = await openAIError(refused);
      assertEquals([error.param, error.code], ["instance.url", "instance_host_not_allowed"]);
      assert(error.message.includes("admin.allowedInstanceHosts"), error.message);
    }
    const ids = t.router.registry.runtime(MODEL)!.cluster.entries().map((e) => e.config.id);
    assertEquals(ids.sort(), ["e0", "extra"]);
  } finally {
    await extra.close();
    await t.close();
  }
});

Deno.test("admin.allowedInstanceHosts replaces the default with its names and CIDR blocks", async () => {
  const t = await startTestCluster({
    engines: 1,
    top: { admin: { allowedInstanceHosts: ["10.0.0.0/8", "gpu.internal"] } },
  });
  try {
    const refused = await add(t.url, { id: "loop", url: "http://127.0.0.1:9" });
    assertEquals(refused.status, 400, "not listed, even though e0 lives there");
    assertEquals((await openAIError(refused)).code, "instance_host_not_allowed");
    for (const [id, url] of [["net", "http://10.9.8.7:8000"], ["name", "http://GPU.internal:80"]]) {
      const added = await add(t.url, { id, url });
      assertEquals(added.status, 201, url);
      await added.body?.cancel();
    }
  } finally {
    await t.close();
  }
});

Deno.test("the admin API refuses an instance URL with credentials and never shows them", async () => {
  const logs: string[] = [];
  const t = await startTestCluster({ engines: 1 });
  try {
    const refused = await add(t.url, { id: "creds", url: `http://admin:s3cret@127.0.0.1:9` });
    assertEquals(refused.status, 400);
    const error = await openAIError(refused);
    assertEquals(error.param, "instance");
    assert(error.message.includes("credentials"), error.message);
    assert(!error.message.includes("s3cret"), error.message);
    const list = await (await fetch(`${t.url}/admin/instances`)).text();
    assert(!list.includes("s3cret"));
    for (const entry of t.logs) logs.push(JSON.stringify(entry));
    assert(!logs.some((line) => line.includes("s3cret")), "nothing logged the password");
  } finally {
    await t.close();
  }
});

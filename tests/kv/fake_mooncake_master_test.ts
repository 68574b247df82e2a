import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { startFakeMooncakeMaster } from "../fakes/fake_mooncake_master.ts";

async function get(url: string): Promise<{ status: number; body: string; type: string | null }> {
  const response = await fetch(url);
  return {
    status: response.status,
    body: await response.text(),
    type: response.headers.get("content-type"),
  };
}

Deno.test("fake Mooncake master answers /batch_query_keys like v0.3.12: sorted map, null fields", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    master.put("b", "10.0.0.5:12345", { size: 1048576 });
    const { status, body } = await get(`${master.url}/batch_query_keys?keys=zz,b,b`);
    strictEqual(status, 200);
    strictEqual(
      body,
      `{"success":true,"data":{"b":{"ok":true,"error":null,"values":[{"size_":1048576,` +
        `"buffer_address_":140231004368896,"protocol_":"tcp","transport_endpoint_":"10.0.0.5:12345"}],` +
        `"disk_values":null,"local_disk_values":null,"nof_values":null},` +
        `"zz":{"ok":false,"error":"OBJECT_NOT_FOUND","values":null,"disk_values":null,` +
        `"local_disk_values":null,"nof_values":null}}}`,
    );
    deepStrictEqual(master.requests[0].keys, ["zz", "b", "b"]);
  } finally {
    await master.close();
  }
});

Deno.test("fake Mooncake master answers an empty key list with the master's exact 400", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    for (const query of ["", "?keys="]) {
      const { status, body } = await get(`${master.url}/batch_query_keys${query}`);
      strictEqual(status, 400);
      strictEqual(body, `{"success":false,"error":"No keys provided. Use ?keys=key1,key2,..."}`);
    }
  } finally {
    await master.close();
  }
});

Deno.test("fake Mooncake master in old_version mode writes keys raw, in order, without null fields", async () => {
  const master = await startFakeMooncakeMaster({ mode: "old_version" });
  try {
    master.put("a", "h:1");
    const { body } = await get(`${master.url}/batch_query_keys?keys=x%20y,a,`);
    strictEqual(
      body,
      `{"success":true,"data":{"x%20y":{"ok":false,"error":"OBJECT_NOT_FOUND"},"a":{"ok":true,` +
        `"values":[{"size_":1048576,"buffer_address_":140231004368896,"protocol_":"tcp",` +
        `"transport_endpoint_":"h:1"}]}}}`,
    );
    strictEqual((await get(`${master.url}/health`)).body, "OK");
  } finally {
    await master.close();
  }
});

Deno.test("fake Mooncake master refuses connections when down and re-opens the same port", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    const port = master.port;
    await master.setMode("down");
    let refused = false;
    try {
      await (await fetch(`${master.url}/health`)).body?.cancel();
    } catch {
      refused = true;
    }
    strictEqual(refused, true);
    await master.setMode("ok");
    strictEqual(master.port, port);
    strictEqual((await get(`${master.url}/health`)).status, 200);
  } finally {
    await master.close();
  }
});

Deno.test("fake Mooncake master plays an HA standby: 503 on queries, service_ready false on /health", async () => {
  const master = await startFakeMooncakeMaster({ mode: "standby503" });
  try {
    const query = await get(`${master.url}/batch_query_keys?keys=a`);
    strictEqual(query.status, 503);
    strictEqual(query.body, `{"success":false,"error":"service plane is not active"}`);
    const health = JSON.parse((await get(`${master.url}/health`)).body);
    strictEqual(health.service_ready, false);
    strictEqual((await get(`${master.url}/get_all_keys`)).status, 503);
  } finally {
    await master.close();
  }
});

Deno.test("fake Mooncake master serves keys, segments, details and metrics for operators", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    master.put("k1", "10.0.0.1:1");
    master.put("k2", "10.0.0.2:1");
    master.put("k2", "10.0.0.1:1");
    strictEqual((await get(`${master.url}/get_all_keys`)).body, "k1\nk2\n");
    strictEqual((await get(`${master.url}/get_all_segments`)).body, "10.0.0.1:1\n10.0.0.2:1\n");
    const detail = JSON.parse((await get(`${master.url}/get_segments_detail`)).body);
    strictEqual(detail.total_segments, 2);
    strictEqual(detail.segments[0].te_endpoint, "10.0.0.1:1");
    strictEqual(detail.segments[0].allocator_used_bytes, 2 * 1048576);
    const metrics = await get(`${master.url}/metrics`);
    ok(metrics.type?.startsWith("text/plain"));
    ok(metrics.body.includes("master_key_count 2\n"), metrics.body);
    const health = JSON.parse((await get(`${master.url}/health`)).body);
    strictEqual(health.status, "ok");
  } finally {
    await master.close();
  }
});

Deno.test("fake Mooncake master accepts writes from other processes over /_fake routes", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    const post = async (path: string, body: unknown) => {
      const response = await fetch(`${master.url}${path}`, {
        method: "POST",
        body: JSON.stringify(body),
      });
      await response.body?.cancel();
      return response.status;
    };
    strictEqual(await post("/_fake/put", { keys: ["a", "b"], endpoint: "10.0.0.9:1" }), 200);
    strictEqual(await post("/_fake/put", { key: "c", endpoint: "10.0.0.9:1", ready: false }), 200);
    strictEqual(await post("/_fake/remove", { key: "a" }), 200);
    const state = JSON.parse((await get(`${master.url}/_fake/state`)).body);
    deepStrictEqual(state.keys, ["b", "c"]);
    const { body } = await get(`${master.url}/batch_query_keys?keys=a,b,c`);
    const data = JSON.parse(body).data;
    strictEqual(data.a.error, "OBJECT_NOT_FOUND");
    strictEqual(data.b.ok, true);
    strictEqual(data.c.error, "REPLICA_IS_NOT_READY");
    strictEqual(await post("/_fake/clear", {}), 200);
    strictEqual((await get(`${master.url}/get_all_keys`)).body, "");
  } finally {
    await master.close();
  }
});

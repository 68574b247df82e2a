import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { startFakeMooncakeMaster } from "../../src/fakes/fake_mooncake_master.ts";

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
  const master = await startFakeMooncakeMaster({
    mode: "standby503",
    leader: { address: "10.0.0.1:50051", viewVersion: 3 },
  });
  try {
    const query = await get(`${master.url}/batch_query_keys?keys=a`);
    strictEqual(query.status, 503);
    strictEqual(
      query.body,
      `{"success":false,"error_code":-1011,"error_message":"service plane is not active"}`,
    );
    strictEqual((await get(`${master.url}/batch_query_keys?keys=`)).status, 503, "before the 400");
    strictEqual(
      (await get(`${master.url}/health`)).body,
      `{"status":"ok","role":"standby","ha_state":"standby","service_ready":false,` +
        `"leader_address":"10.0.0.1:50051","view_version":3}`,
    );
    strictEqual((await get(`${master.url}/get_all_keys`)).status, 503);
    deepStrictEqual(await get(`${master.url}/role`), {
      status: 200,
      body: "standby",
      type: "text/plain; charset=utf-8",
    });
    await master.setMode("ok");
    master.setLeader(undefined);
    strictEqual(
      (await get(`${master.url}/leader`)).body,
      `{"present":false,"leader_address":null,"view_version":null}`,
    );
  } finally {
    await master.close();
  }
});

Deno.test("fake Mooncake HA pair: one store, demote and promote swap who serves it", async () => {
  const leader = await startFakeMooncakeMaster();
  const standby = await startFakeMooncakeMaster({ mode: "standby503", shareStoreWith: leader });
  try {
    leader.put("k", "10.0.0.5:1");
    const view = { address: "10.0.0.2:50051", viewVersion: 2 };
    await leader.demote();
    await standby.promote(view);
    strictEqual((await get(`${leader.url}/batch_query_keys?keys=k`)).status, 503);
    const role = JSON.parse((await get(`${leader.url}/health`)).body);
    deepStrictEqual([role.role, role.ha_state, role.service_ready], ["standby", "standby", false]);
    const served = await get(`${standby.url}/batch_query_keys?keys=k`);
    strictEqual(served.status, 200);
    ok(served.body.includes('"transport_endpoint_":"10.0.0.5:1"'), served.body);
    strictEqual(
      (await get(`${standby.url}/health`)).body,
      `{"status":"ok","role":"leader","ha_state":"serving","service_ready":true,` +
        `"leader_address":"10.0.0.2:50051","view_version":2}`,
    );
  } finally {
    await standby.close();
    await leader.close();
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

/** One request over a plain socket, so that its bytes go out exactly as written. */
async function raw(port: number, request: string): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(new TextEncoder().encode(request));
    let text = "";
    const buffer = new Uint8Array(65536);
    for (let n = await conn.read(buffer); n !== null; n = await conn.read(buffer)) {
      text += new TextDecoder().decode(buffer.subarray(0, n));
    }
    return text;
  } finally {
    conn.close();
  }
}

Deno.test("fake Mooncake master refuses what the real master refuses, the way cinatra does", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    const posted = await fetch(`${master.url}/batch_query_keys?keys=a`, { method: "POST" });
    deepStrictEqual(
      [posted.status, await posted.text(), posted.headers.get("content-type")],
      [404, "404 Not Found", null],
    );
    const garbled = await raw(master.port, "HELLO\r\n\r\n");
    ok(garbled.startsWith("HTTP/1.1 400 Bad Request\r\nServer: cinatra\r\n"), garbled);
    ok(garbled.endsWith("\r\n\r\ninvalid http protocol"), garbled);
    // A key that is not UTF-8 once decoded: struct_json throws, cinatra answers a bare 503.
    const latin1 = await get(`${master.url}/batch_query_keys?keys=ok,caf%E9`);
    deepStrictEqual(latin1, { status: 503, body: "503 Service Unavailable", type: null });
    // cinatra decodes a path holding `%` before routing.
    strictEqual((await get(`${master.url}/batch%5Fquery_keys?keys=a`)).status, 200);
    strictEqual(master.count, 2, "the refused POST never reached the handler");
  } finally {
    await master.close();
  }
});

Deno.test("fake Mooncake master decodes keys like cinatra and writes them like struct_json", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    master.put("uni\u00e9", "h:1", { size: 8 });
    master.put('tab\tq"', "h:1", { size: 8 });
    const { body } = await get(`${master.url}/batch_query_keys?keys=uni%C3%A9,tab%09q%22,a%zz,b`);
    const data = body.slice(body.indexOf(`"data":{`) + 8);
    // Byte order; non-ASCII as upper-case \u escapes; the malformed escape cut the list at "a?".
    ok(data.startsWith(`"a?":{"ok":false,"error":"OBJECT_NOT_FOUND"`), data);
    ok(data.includes(`,"tab\\tq\\"":{"ok":true,"error":null,"values":[{"size_":8,`), data);
    ok(data.includes(`,"uni\\u00E9":{"ok":true,`), data);
    deepStrictEqual(master.requests[0].keys, ["uni\u00e9", 'tab\tq"', "a?"]);
    // U+FFFD sorts before U+1F600 in UTF-8 bytes (not in UTF-16 units).
    const order = await get(`${master.url}/batch_query_keys?keys=%F0%9F%98%80,%EF%BF%BD`);
    ok(order.body.indexOf("\\uFFFD") < order.body.indexOf("\\uD83D\\uDE00"), order.body);
  } finally {
    await master.close();
  }
});

Deno.test("fake Mooncake master places replicas in their segment first fit and reports it like the master", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    master.mountSegment("10.0.0.1:15000", {
      baseAddress: 0x7f0000000000,
      size: 1 << 20,
      segmentId: "1-2",
      clientId: "3-4",
    });
    master.put("a", "10.0.0.1:15000", { size: 64 });
    master.put("b", "10.0.0.1:15000", { size: 64 });
    master.remove("a");
    master.put("c", "10.0.0.1:15000", { size: 32 });
    const { body } = await get(`${master.url}/query_key?key=c`);
    strictEqual(
      body,
      `{"success":true,"data":[{"size_":32,"buffer_address_":${0x7f0000000000},` +
        `"protocol_":"tcp","transport_endpoint_":"10.0.0.1:15000"}]}`,
    );
    strictEqual(
      (await get(`${master.url}/get_segments_detail`)).body,
      `{"total_segments":1,"segments":[{"segment_name":"10.0.0.1:15000","segment_id":"1-2",` +
        `"client_id":"3-4","base_address":"0x7f0000000000","size_bytes":1048576,` +
        `"size_human":"0.000976562 GiB","te_endpoint":"10.0.0.1:15000","protocol":"tcp",` +
        `"status":"OK","allocator_used_bytes":96,"allocator_capacity_bytes":1048576,` +
        `"allocator_usage_percent":9.1552734375E-3}]}`,
    );
    const missing = await get(`${master.url}/query_key?key=a`);
    deepStrictEqual(missing, {
      status: 404,
      body: `{"success":false,"error_code":-704,"error_message":"OBJECT_NOT_FOUND"}`,
      type: "application/json; charset=utf-8",
    });
    master.unmountSegment("10.0.0.1:15000");
    strictEqual((await get(`${master.url}/get_all_segments`)).body, "");
    strictEqual((await get(`${master.url}/get_all_keys`)).body, "");
  } finally {
    await master.close();
  }
});

Deno.test("fake Mooncake master on its metadata port answers cinatra's 404 to every admin path", async () => {
  const master = await startFakeMooncakeMaster({ mode: "metadata_port" });
  try {
    for (const path of ["/batch_query_keys?keys=a", "/health", "/get_all_keys"]) {
      deepStrictEqual(await get(`${master.url}${path}`), {
        status: 404,
        body: "404 Not Found",
        type: null,
      });
    }
  } finally {
    await master.close();
  }
});

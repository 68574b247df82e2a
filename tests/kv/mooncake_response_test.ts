import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import {
  hostOfEndpoint,
  parseBatchQueryKeysResponse,
  parseEntry,
} from "../../src/kv/mooncake_response.ts";
import type { KeyLocation } from "../../src/kv/types.ts";

function answer(body: string, status = 200): Map<string, KeyLocation> {
  const parsed = parseBatchQueryKeysResponse(status, body);
  if (!parsed.ok) throw new Error(`expected an answer, got: ${parsed.error}`);
  return parsed.locations;
}

function failure(body: string, status = 200): { error: string; standby: boolean } {
  const parsed = parseBatchQueryKeysResponse(status, body);
  if (parsed.ok) throw new Error("expected a failure, got an answer");
  return parsed;
}

const absent = (error?: string): KeyLocation => ({
  present: false,
  memoryHosts: [],
  localDiskHosts: [],
  sharedDisk: false,
  ...(error === undefined ? {} : { error }),
});

Deno.test("parseBatchQueryKeysResponse() reads the v0.3.12 shape with null fields (compat.md example)", () => {
  const body = `{"success":true,"data":{
 "k1":{"ok":true,"error":null,"values":[{"size_":1048576,"buffer_address_":140231004368896,"protocol_":"tcp","transport_endpoint_":"10.0.0.5:12345"}],"disk_values":null,"local_disk_values":null,"nof_values":null},
 "zz":{"ok":false,"error":"OBJECT_NOT_FOUND","values":null,"disk_values":null,"local_disk_values":null,"nof_values":null}}}`;
  const locations = answer(body);
  deepStrictEqual(locations.get("k1"), {
    present: true,
    memoryHosts: ["10.0.0.5"],
    localDiskHosts: [],
    sharedDisk: false,
  });
  deepStrictEqual(locations.get("zz"), absent("OBJECT_NOT_FOUND"));
  strictEqual(locations.size, 2);
});

Deno.test("parseBatchQueryKeysResponse() treats omitted fields like null (v0.3.9-0.3.11 hand-written JSON)", () => {
  const body = `{"success":true,"data":{"a_0":{"ok":true,"values":[` +
    `{"size_":4096,"buffer_address_":1,"protocol_":"rdma","transport_endpoint_":"node-1:17000"},` +
    `{"size_":4096,"buffer_address_":2,"protocol_":"rdma","transport_endpoint_":"node-2:17000"}]},` +
    `"b_0":{"ok":false,"error":"OBJECT_NOT_FOUND"}}}`;
  const locations = answer(body);
  deepStrictEqual(locations.get("a_0")?.memoryHosts, ["node-1", "node-2"]);
  strictEqual(locations.get("a_0")?.present, true);
  deepStrictEqual(locations.get("b_0"), absent("OBJECT_NOT_FOUND"));
});

Deno.test("parseBatchQueryKeysResponse() keeps the last of duplicated keys in a hand-written answer", () => {
  const body = `{"success":true,"data":{"k":{"ok":false,"error":"OBJECT_NOT_FOUND"},` +
    `"k":{"ok":false,"error":"OBJECT_NOT_FOUND"}}}`;
  deepStrictEqual([...answer(body).keys()], ["k"]);
});

Deno.test("parseBatchQueryKeysResponse() strips IPv6 brackets and ports, and lower-cases hosts", () => {
  const body = `{"success":true,"data":{"k":{"ok":true,"values":[` +
    `{"transport_endpoint_":"[FE80::1]:12345"},{"transport_endpoint_":"[fe80::1]:23456"},` +
    `{"transport_endpoint_":"Node-A:1"}]}}}`;
  deepStrictEqual(answer(body).get("k")?.memoryHosts, ["fe80::1", "node-a"]);
});

Deno.test("parseBatchQueryKeysResponse() reads local_disk_values' transport_endpoint (no underscore)", () => {
  const body =
    `{"success":true,"data":{"k":{"ok":true,"error":null,"values":[],"disk_values":null,` +
    `"local_disk_values":[{"client_id":"c1","object_size":3101952,"transport_endpoint":"10.0.0.7:15000"}],` +
    `"nof_values":null}}}`;
  deepStrictEqual(answer(body).get("k"), {
    present: true,
    memoryHosts: [],
    localDiskHosts: ["10.0.0.7"],
    sharedDisk: false,
  });
});

Deno.test("parseBatchQueryKeysResponse() counts a shared-disk copy as present with no host", () => {
  const body = `{"success":true,"data":{"k":{"ok":true,"values":[],` +
    `"disk_values":[{"file_path":"/mnt/mc/k","object_size":4096}]}}}`;
  deepStrictEqual(answer(body).get("k"), {
    present: true,
    memoryHosts: [],
    localDiskHosts: [],
    sharedDisk: true,
  });
});

Deno.test("parseBatchQueryKeysResponse() counts NVMe-oF replicas as present but on no engine host", () => {
  const body = `{"success":true,"data":{"k":{"ok":true,"values":[],` +
    `"nof_values":[{"size_":1,"buffer_address_":1,"protocol_":"rdma","transport_endpoint_":"nof:1"}]}}}`;
  const location = answer(body).get("k");
  strictEqual(location?.present, true);
  deepStrictEqual(location?.memoryHosts, []);
});

Deno.test("parseBatchQueryKeysResponse() treats REPLICA_IS_NOT_READY as not present", () => {
  const body = `{"success":true,"data":{"k":{"ok":false,"error":"REPLICA_IS_NOT_READY",` +
    `"values":null,"disk_values":null,"local_disk_values":null,"nof_values":null}}}`;
  deepStrictEqual(answer(body).get("k"), absent("REPLICA_IS_NOT_READY"));
});

Deno.test("parseBatchQueryKeysResponse() treats ok:true without any replica as not present", () => {
  deepStrictEqual(
    answer(`{"success":true,"data":{"k":{"ok":true,"values":[]}}}`).get("k"),
    absent(),
  );
  deepStrictEqual(
    answer(`{"success":true,"data":{"k":{"ok":true,"values":null}}}`).get("k"),
    absent(),
  );
  deepStrictEqual(answer(`{"success":true,"data":{"k":{"ok":true}}}`).get("k"), absent());
});

Deno.test("parseBatchQueryKeysResponse() reads entries that omit the empty lists instead of writing null", () => {
  const body = `{"success":true,"data":{"a":{"ok":true,"values":[]},"b":{"ok":true,"values":[],` +
    `"local_disk_values":[{"client_id":"c","object_size":1,"transport_endpoint":"h:1"}]}}}`;
  const locations = answer(body);
  strictEqual(locations.get("a")?.present, false);
  strictEqual(locations.get("b")?.present, true);
});

Deno.test("parseBatchQueryKeysResponse() makes only the malformed entry absent, not the batch", () => {
  const body = `{"success":true,"data":{"bad1":7,"bad2":{"ok":true,"values":"x"},` +
    `"bad3":{"ok":true,"values":[null,5,{"transport_endpoint_":42}]},` +
    `"good":{"ok":true,"values":[{"transport_endpoint_":"h:1"}]}}}`;
  const locations = answer(body);
  deepStrictEqual(locations.get("bad1"), absent("MALFORMED_ENTRY"));
  strictEqual(locations.get("bad2")?.present, false);
  // Items without a usable endpoint still prove a replica exists; they name no host.
  strictEqual(locations.get("bad3")?.present, true);
  deepStrictEqual(locations.get("bad3")?.memoryHosts, []);
  deepStrictEqual(locations.get("good")?.memoryHosts, ["h"]);
});

Deno.test("parseBatchQueryKeysResponse() accepts an empty or missing data map", () => {
  strictEqual(answer(`{"success":true,"data":{}}`).size, 0);
  strictEqual(answer(`{"success":true}`).size, 0);
});

Deno.test("parseBatchQueryKeysResponse() reports a 503 standby precisely, JSON or plain body", () => {
  const json = failure(`{"success":false,"error":"service plane is not active"}`, 503);
  strictEqual(json.standby, true);
  ok(json.error.includes("503"), json.error);
  ok(json.error.includes("service plane is not active"), json.error);
  ok(json.error.includes("list every master of the HA group in kv.url"), json.error);
  const coded = failure(
    `{"success":false,"error_code":-1011,"error_message":"service plane is not active"}`,
    503,
  );
  ok(coded.error.includes("service plane is not active"), coded.error);
  const plain = failure("STANDBY", 503);
  ok(plain.error.includes(`"STANDBY"`), plain.error);
});

Deno.test("parseBatchQueryKeysResponse() reports other HTTP errors with their status and message", () => {
  const bad = failure(`{"success":false,"error":"No keys provided. Use ?keys=key1,key2,..."}`, 400);
  ok(bad.error.includes("400") && bad.error.includes("No keys provided"), bad.error);
  strictEqual(bad.standby, false);
  const internal = failure("Internal Server Error", 500);
  ok(internal.error.includes("HTTP 500") && internal.error.includes("Internal Server Error"));
  const missing = failure("Not Found", 404);
  ok(missing.error.includes("v0.3.9") && missing.error.includes("9003"), missing.error);
  ok(failure("", 502).error.includes("empty body"));
});

Deno.test("parseBatchQueryKeysResponse() reports invalid JSON, success:false and wrong shapes", () => {
  ok(failure(`{"success":true,"data":{"<html>`).error.includes("invalid JSON"));
  ok(failure("<html>proxy error</html>").error.includes("<html>proxy error</html>"));
  const refused = failure(`{"success":false,"error":"boom"}`);
  ok(refused.error.includes("success:false") && refused.error.includes("boom"), refused.error);
  ok(failure(`{"data":{}}`).error.includes("success:undefined"));
  for (const body of ["[]", "null", `"text"`, "42"]) {
    ok(failure(body).error.includes("not an object"), body);
  }
  ok(failure(`{"success":true,"data":[{"transport_endpoint_":"h:1"}]}`).error.includes("array"));
  ok(failure(`{"success":true,"data":"x"}`).error.includes("type string"));
});

Deno.test("parseBatchQueryKeysResponse() never throws on truncated or mangled bodies", () => {
  const body = `{"success":true,"data":{"k1":{"ok":true,"error":null,"values":[{"size_":1,` +
    `"buffer_address_":2,"protocol_":"tcp","transport_endpoint_":"[::1]:3"}],"disk_values":null,` +
    `"local_disk_values":[{"transport_endpoint":"h:1"}],"nof_values":null}}}`;
  let answers = 0;
  for (let cut = 0; cut <= body.length; cut++) {
    const mangled = [
      body.slice(0, cut),
      body.slice(cut),
      body.slice(0, cut) + "}" + body.slice(cut),
    ];
    for (const text of mangled) {
      const parsed = parseBatchQueryKeysResponse(200, text);
      if (parsed.ok) answers++;
      else ok(parsed.error.length > 0);
    }
  }
  ok(answers >= 2, "the intact body must parse");
});

Deno.test("parseEntry() keeps the store's error code even when replicas are listed", () => {
  const location = parseEntry({
    ok: false,
    error: "REPLICA_IS_NOT_READY",
    values: [{ transport_endpoint_: "h:1" }],
  });
  strictEqual(location.present, false);
  strictEqual(location.error, "REPLICA_IS_NOT_READY");
});

Deno.test("hostOfEndpoint() splits host and port for IPv4, names, bracketed and bare IPv6", () => {
  strictEqual(hostOfEndpoint("10.0.0.5:12345"), "10.0.0.5");
  strictEqual(hostOfEndpoint("[fe80::1]:12345"), "fe80::1");
  strictEqual(hostOfEndpoint("[fe80::1]"), "fe80::1");
  strictEqual(hostOfEndpoint("fe80::1"), "fe80::1");
  strictEqual(hostOfEndpoint("gpu-node-3"), "gpu-node-3");
  strictEqual(hostOfEndpoint(" Host:1 "), "host");
  strictEqual(hostOfEndpoint(""), undefined);
  strictEqual(hostOfEndpoint(":123"), undefined);
  strictEqual(hostOfEndpoint("[]:1"), undefined);
});

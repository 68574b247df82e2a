/**
 * The client-side parser over every answer a real `mooncake_master` gave in
 * tests/data/mooncake_master_responses.txt (docs/compat.md §4).
 */
import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { hostOfEndpoint, parseBatchQueryKeysResponse } from "../../src/kv/mooncake_response.ts";
import {
  loadRecording,
  pathOf,
  type RecordedCase,
  syntheticKeys,
  textOf,
} from "./mooncake_recording.ts";

const ABSENT = `{"ok":false,"error":"OBJECT_NOT_FOUND","values":null,"disk_values":null,` +
  `"local_disk_values":null,"nof_values":null}`;

/**
 * The whole body of an answer the recording cut or summarized: every synthesized key absent, in
 * byte order, the way the real master wrote the part it kept.
 */
function rebuilt(item: RecordedCase): string {
  const keys = [...new Set(syntheticKeys(item.keyCount!))].sort();
  return `{"success":true,"data":{${keys.map((k) => `"${k}":${ABSENT}`).join(",")}}}`;
}

interface Entry {
  ok: boolean;
  error: string | null;
  values: { transport_endpoint_: string }[] | null;
}

Deno.test("parseBatchQueryKeysResponse() reads every recorded /batch_query_keys answer", async () => {
  const cases = (await loadRecording()).filter((c) => pathOf(c.target) === "/batch_query_keys");
  const seen = new Map<string, ReturnType<typeof parseBatchQueryKeysResponse>>();
  for (const item of cases) {
    let body = textOf(item.body);
    if (item.keyCount !== undefined) {
      body = rebuilt(item);
      if (item.truncated) {
        ok(body.startsWith(item.truncated.prefix), `#${item.index}: rebuilt like the recording`);
        strictEqual(new TextEncoder().encode(body).length, item.truncated.totalBytes);
      }
    }
    const parsed = parseBatchQueryKeysResponse(item.status, body);
    const where = `#${item.index} [${item.label}] ${item.target.slice(0, 60)}`;
    seen.set(where, parsed);
    if (item.status === 200) {
      ok(parsed.ok, `${where}: ${parsed.ok || parsed.error}`);
      const data = JSON.parse(body).data as Record<string, Entry>;
      deepStrictEqual([...parsed.locations.keys()].sort(), Object.keys(data).sort(), where);
      for (const [key, entry] of Object.entries(data)) {
        const hosts = [
          ...new Set((entry.values ?? []).map((v) => hostOfEndpoint(v.transport_endpoint_))),
        ];
        deepStrictEqual(parsed.locations.get(key), {
          present: entry.ok,
          memoryHosts: hosts,
          localDiskHosts: [],
          sharedDisk: false,
          ...(entry.error === null ? {} : { error: entry.error }),
        }, `${where}: ${key}`);
      }
      if (item.entries !== undefined) strictEqual(parsed.locations.size, item.entries, where);
      continue;
    }
    ok(!parsed.ok, where);
    if (parsed.ok) continue;
    ok(parsed.error.includes(String(item.status)), parsed.error);
    if (item.status === 400) {
      ok(parsed.error.includes("No keys provided") && !parsed.standby, parsed.error);
    } else if (item.status === 503) {
      ok(parsed.error.includes("service plane is not active") && parsed.standby, parsed.error);
    } else {
      // The HTTP metadata port instead of the admin port: cinatra's plain 404.
      strictEqual(item.status, 404);
      ok(parsed.error.includes(`"404 Not Found"`) && parsed.error.includes("9003"), parsed.error);
      strictEqual(parsed.standby, false);
    }
  }
  strictEqual(cases.length, 37, "every recorded /batch_query_keys answer");

  // A few answers spelled out.
  const locations = (index: number) => {
    const parsed = [...seen].find(([where]) => where.startsWith(`#${index} `))![1];
    if (!parsed.ok) throw new Error(parsed.error);
    return parsed.locations;
  };
  deepStrictEqual([...locations(10).keys()], ["a?"], "a malformed escape cuts the key list");
  deepStrictEqual([...locations(6).keys()], ["", "a", "b"], "empty keys are keys");
  deepStrictEqual(locations(34).get("v6key")?.memoryHosts, ["::1"]);
  deepStrictEqual(locations(37).get("uni\u00e9")?.memoryHosts, ["127.0.0.1"]);
  strictEqual(locations(37).get("pct%2Cenc")?.present, true);
  deepStrictEqual(locations(38).get("comma"), {
    present: false,
    memoryHosts: [],
    localDiskHosts: [],
    sharedDisk: false,
    error: "OBJECT_NOT_FOUND",
  });
});

Deno.test("parseBatchQueryKeysResponse() refuses every recorded /health answer, never reads it as keys", async () => {
  const cases = (await loadRecording()).filter((c) => pathOf(c.target) === "/health");
  strictEqual(cases.length, 9);
  for (const item of cases) {
    const body = textOf(item.body);
    ok("leader_address" in JSON.parse(body) && "view_version" in JSON.parse(body), body);
    const parsed = parseBatchQueryKeysResponse(item.status, body);
    ok(!parsed.ok, body);
    if (parsed.ok) continue;
    ok(parsed.error.includes("success:undefined"), parsed.error);
    strictEqual(parsed.standby, false);
  }
});

Deno.test("parseBatchQueryKeysResponse() refuses every other recorded answer with a reason", async () => {
  const others = (await loadRecording()).filter((c) =>
    !["/batch_query_keys", "/health"].includes(pathOf(c.target))
  );
  strictEqual(others.length, 33);
  for (const item of others) {
    const parsed = parseBatchQueryKeysResponse(item.status, textOf(item.body));
    ok(!parsed.ok, `#${item.index} ${item.target}`);
    if (!parsed.ok) ok(parsed.error.length > 0);
  }
});

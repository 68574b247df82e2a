import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { type MasterHealth, parseMasterHealth, servingMaster } from "../../src/kv/master_health.ts";

Deno.test("parseMasterHealth reads the recorded leader and an HA standby", () => {
  deepStrictEqual(
    parseMasterHealth(
      200,
      '{"status":"ok","role":"leader","ha_state":"serving","service_ready":true,' +
        '"leader_address":null,"view_version":null}',
    ),
    { serving: true, role: "leader", haState: "serving" },
  );
  deepStrictEqual(
    parseMasterHealth(
      200,
      '{"status":"ok","role":"standby","ha_state":"standby","service_ready":false,' +
        '"leader_address":"127.0.0.1:50301","view_version":1}',
    ),
    { serving: false, role: "standby", haState: "standby", leaderAddress: "127.0.0.1:50301" },
  );
});

Deno.test("parseMasterHealth: service_ready decides; a warming-up leader does not serve yet", () => {
  strictEqual(
    parseMasterHealth(200, '{"role":"leader","ha_state":"leader_warmup","service_ready":false}')
      ?.serving,
    false,
  );
  strictEqual(parseMasterHealth(200, '{"role":"primary","ha_state":"serving"}')?.serving, true);
  strictEqual(
    parseMasterHealth(200, '{"role":"standby","ha_state":"catching_up"}')?.serving,
    false,
  );
});

Deno.test("parseMasterHealth: an old master's plain OK serves; anything else is no master's health", () => {
  deepStrictEqual(parseMasterHealth(200, "OK"), { serving: true });
  strictEqual(parseMasterHealth(404, "404 Not Found"), undefined);
  strictEqual(parseMasterHealth(200, "<html>"), undefined);
  strictEqual(parseMasterHealth(200, "[1]"), undefined);
});

Deno.test("servingMaster keeps the followed master while it serves, else takes the first that does", () => {
  const up: MasterHealth = { serving: true };
  const standby: MasterHealth = { serving: false };
  const urls = ["a", "b", "c"];
  strictEqual(servingMaster(urls, new Map([["a", up], ["b", up]]), "b"), "b");
  strictEqual(servingMaster(urls, new Map([["a", standby], ["b", standby], ["c", up]]), "a"), "c");
  strictEqual(servingMaster(urls, new Map([["a", standby], ["b", undefined]]), "a"), undefined);
});

/**
 * MooncakeClient in front of an HA group of fake masters (one store, a leader and standbys):
 * it follows the master that serves, never asks a standby twice for one batch, and finds the
 * new leader after a failover.
 */
import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { MooncakeClient, type MooncakeClientOptions } from "../../src/kv/mooncake_client.ts";
import { StoreHealth } from "../../src/kv/store_health.ts";
import {
  type FakeMooncakeMaster,
  startFakeMooncakeMaster,
} from "../../src/fakes/fake_mooncake_master.ts";
import { eventually } from "../support/eventually.ts";

/** A serving leader and a standby sharing its store; `fn` gets [standby, leader]. */
async function withPair(
  fn: (standby: FakeMooncakeMaster, leader: FakeMooncakeMaster) => Promise<void>,
): Promise<void> {
  const leader = await startFakeMooncakeMaster();
  const standby = await startFakeMooncakeMaster({ mode: "standby503", shareStoreWith: leader });
  try {
    await fn(standby, leader);
  } finally {
    await Promise.all([standby.close(), leader.close()]);
  }
}

function client(urls: string[], options: Partial<MooncakeClientOptions> = {}) {
  return new MooncakeClient({ url: urls, deadlineMs: 1_000, retryBackoffMs: 1, ...options });
}

const KEY = "k0_0";

Deno.test("MooncakeClient asks a standby listed first once, answers from the leader, then follows it", async () => {
  await withPair(async (standby, leader) => {
    leader.put(KEY, "10.0.0.1:1");
    const changes: unknown[] = [];
    const mooncake = client([standby.url, leader.url], {
      onMasterChange: (change) => changes.push(change),
    });
    const first = await mooncake.lookup([KEY]);
    strictEqual(first.outcome, "ok");
    strictEqual(first.locations.get(KEY)?.present, true);
    strictEqual(first.attempts, 2);
    strictEqual(standby.count, 1, "the standby's 503 is not retried");
    strictEqual(leader.count, 1);
    strictEqual(mooncake.url, leader.url);
    deepStrictEqual(changes, [{ from: standby.url, to: leader.url }]);

    const second = await mooncake.lookup([KEY]);
    strictEqual(second.attempts, 1);
    strictEqual(standby.count, 1, "the standby is not asked first any more");
    strictEqual(mooncake.health.state, "up");
  });
});

Deno.test("MooncakeClient passes over a wrong port's 404 and an unreachable master to the leader", async () => {
  await withPair(async (standby, leader) => {
    leader.put(KEY, "10.0.0.1:1");
    await standby.setMode("metadata_port");
    const gone = await startFakeMooncakeMaster();
    const goneUrl = gone.url;
    await gone.close();
    const result = await client([goneUrl, standby.url, leader.url]).lookup([KEY]);
    strictEqual(result.outcome, "ok");
    strictEqual(result.attempts, 3);
    strictEqual(standby.count, 1);
  });
});

Deno.test("MooncakeClient follows a standby promoted after the leader stepped down, in the same lookup", async () => {
  await withPair(async (standby, leader) => {
    leader.put(KEY, "10.0.0.1:1");
    const mooncake = client([leader.url, standby.url]);
    strictEqual((await mooncake.lookup([KEY])).outcome, "ok");
    await leader.demote();
    await standby.promote();
    const after = await mooncake.lookup([KEY]);
    strictEqual(after.outcome, "ok");
    strictEqual(after.locations.get(KEY)?.present, true, "the new leader knows the key");
    strictEqual(mooncake.url, standby.url);
    strictEqual(mooncake.health.state, "up");
  });
});

Deno.test("MooncakeClient with no master serving marks the store down, then a /health sweep ends the window", async () => {
  await withPair(async (standby, leader) => {
    leader.put(KEY, "10.0.0.1:1");
    const health = new StoreHealth({ downWindowMs: 600_000 });
    const mooncake = client([leader.url, standby.url], { health, leaderCheckTimeoutMs: 20 });
    await leader.demote();
    const failed = await mooncake.lookup([KEY]);
    strictEqual(failed.outcome, "failed");
    strictEqual(failed.attempts, 2, "each master asked once");
    ok(failed.error?.includes("list every master"), failed.error);
    strictEqual(health.state, "down");

    await standby.promote();
    // Skipped lookups ask every master's /health (at most once per 20 ms) until one serves; the
    // window ends then and the next lookup is the probe, answered by the new leader.
    const outcomes: string[] = [];
    await eventually(
      async () => {
        outcomes.push((await mooncake.lookup([KEY])).outcome);
        return outcomes.at(-1) === "ok";
      },
      10_000,
      () => `a lookup answered (${outcomes.join(", ")})`,
    );
    ok(outcomes.slice(0, -1).every((o) => o === "store_down"), outcomes.join(", "));
    strictEqual(mooncake.url, standby.url);
    strictEqual(health.state, "up");
    ok(mooncake.leaderChecks >= 1);
  });
});

Deno.test("MooncakeClient with one master never sweeps /health: there is nothing to choose", async () => {
  await withPair(async (standby) => {
    const mooncake = client([standby.url]);
    strictEqual((await mooncake.lookup([KEY])).outcome, "failed");
    strictEqual((await mooncake.lookup([KEY])).outcome, "store_down");
    strictEqual(mooncake.leaderChecks, 0);
    strictEqual(standby.count, 1);
  });
});

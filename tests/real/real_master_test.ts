/**
 * The store client and the router against the real `mooncake_master` (the wheel's), filled by
 * real store clients as engines on 127.0.0.2 and 127.0.0.3 would fill it: batch queries and the
 * real answer's format, percent-encoded keys, 20,000 keys in one lookup, a hung master (SIGSTOP),
 * a killed one and its restart (the router's own client: its kept connections,
 * src/kv/keep_alive_get.ts). The same scenarios run against the fake in tests/kv/.
 */
import { assert, assertEquals } from "../assert.ts";
import { MooncakeClient } from "../../src/kv/mooncake_client.ts";
import { keepAliveGet } from "../../src/kv/keep_alive_get.ts";
import { StoreHealth } from "../../src/kv/store_health.ts";
import { completion, MODEL, range, startTestCluster } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import { startRealMaster, startStoreClient } from "./mooncake_master.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";

/** A monotonic clock the test can jump forward (past a down-window at once). */
function jumpClock() {
  let offset = 0;
  return { now: () => performance.now() + offset, jump: (ms: number) => (offset += ms) };
}

Deno.test("real mooncake_master: batch lookups find each key on the host that put it, encoded keys too, 20,000 at once, through fetch and the router's kept connections", async () => {
  const master = await startRealMaster();
  const a = await startStoreClient("127.0.0.2", master);
  const b = await startStoreClient("127.0.0.3", master);
  const kept = keepAliveGet({ fallback: fetch });
  try {
    const plain = "tiny-qwen3@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@ab12";
    const odd = ["my model@ab12", "k/ey%25?&#", "ünï-çødé@1", "comma-free;semi"];
    await a.put([plain, ...odd]);
    const many = Array.from({ length: 20_000 }, (_, i) => `many_${i}`);
    await b.put(["b-only_0", ...many]);
    for (const [name, client] of [["fetch", fetch], ["kept connections", kept.fetch]] as const) {
      const store = new MooncakeClient({ url: master.url, deadlineMs: 2_000, fetch: client });
      const result = await store.lookup([plain, ...odd, "b-only_0", "absent_0"]);
      assertEquals(result.outcome, "ok", name);
      assertEquals(result.locations.get(plain)?.memoryHosts, ["127.0.0.2"]);
      for (const key of odd) {
        assertEquals(result.locations.get(key)?.memoryHosts, ["127.0.0.2"], `${name}: ${key}`);
      }
      assertEquals(result.locations.get("b-only_0")?.memoryHosts, ["127.0.0.3"]);
      assertEquals(result.locations.get("absent_0")?.present, false);

      const started = performance.now();
      const all = await new MooncakeClient({ url: master.url, deadlineMs: 10_000, fetch: client })
        .lookup(many);
      console.log(
        `${name}, 20,000 keys: ${all.batches} batches in ${
          (performance.now() - started).toFixed(0)
        } ms`,
      );
      assertEquals(all.outcome, "ok", name);
      assertEquals([...all.locations.values()].filter((l) => l.present).length, 20_000);
      assert([...all.locations.values()].every((l) => l.memoryHosts.includes("127.0.0.3")));
    }
  } finally {
    kept.close();
    await Promise.all([a.close(), b.close()]);
    await master.stop();
  }
});

Deno.test("real mooncake_master: a hung master misses the deadline and opens the down-window; resumed, it answers", async () => {
  const master = await startRealMaster();
  const a = await startStoreClient("127.0.0.2", master);
  try {
    await a.put(["hung_0"]);
    const clock = jumpClock();
    const health = new StoreHealth({ deadlinesToOpen: 2 });
    const client = new MooncakeClient({ url: master.url, deadlineMs: 200, health, now: clock.now });
    await master.process.pause();
    for (let i = 0; i < 2; i++) {
      const started = performance.now();
      const result = await client.lookup(["hung_0"]);
      assertEquals(result.outcome, "deadline");
      assert(performance.now() - started < 2_000, "returned by the deadline");
    }
    assertEquals(health.state, "down");
    assertEquals((await client.lookup(["hung_0"])).outcome, "store_down");
    master.process.resume();
    clock.jump(60_000);
    await eventually(
      async () => (await client.lookup(["hung_0"])).outcome === "ok",
      10_000,
      "resumed",
    );
    assertEquals((await client.lookup(["hung_0"])).locations.get("hung_0")?.memoryHosts, [
      "127.0.0.2",
    ]);
  } finally {
    master.process.resume();
    await a.close();
    await master.stop();
  }
});

Deno.test("real mooncake_master: the router dispatches by its hits, fails no request while it is killed, and uses it again after a restart", async () => {
  const master = await startRealMaster();
  const t = await startTestCluster({
    engines: 2,
    kv: { url: master.url, timeoutMs: 500, downWindowMs: 200 },
  });
  const scheme = createKeyScheme({
    hash: "sha256_cbor",
    seed: "0",
    chunkSize: 16,
    keyFormat: "llumnix",
  });
  let holder = await startStoreClient(t.kvHost(1), master);
  try {
    const prompt = range(5000, 160);
    await holder.put(scheme.keys(prompt));
    const served = async () => {
      const response = await completion(t.url, { prompt });
      assertEquals(response.status, 200);
      await response.body?.cancel();
      return response.headers.get("x-tidegate-instance");
    };
    assertEquals(await served(), "e1", "the instance whose host holds the prefix");
    await master.process.stop(); // killed: connection refused
    for (let i = 0; i < 4; i++) assert(await served() !== null, "served by load");
    await holder.close();
    await master.restart();
    holder = await startStoreClient(t.kvHost(1), master);
    await holder.put(scheme.keys(prompt));
    await eventually(async () => await served() === "e1", 15_000, "hits from the restarted master");
    assertEquals(MODEL, t.router.registry.runtimes()[0].config.name);
  } finally {
    await holder.close();
    await t.close();
    await master.stop();
  }
});

/**
 * The Mooncake master's KV events (#25). The wheel's mooncake_master takes `--enable_kv_events`
 * but is built without the publisher (no libzmq in it; with the flag set it publishes nothing:
 * checked with a pyzmq subscriber, 2026-11-27, mooncake-transfer-engine-non-cuda 0.3.13.post1).
 * So the events come from a libzmq publisher speaking the master's format, event maps as a real
 * master built with the publisher sends them (tests/data/mooncake_master_kv_events.txt), announcing
 * what the test does to the real master through the real store client; snapshots and lookups are
 * the real master's. The router's pool mirror (src/kv/events/pool_mirror.ts) follows puts and
 * removals, agrees key for key with the master's lookups, survives the events being cut and the
 * publisher restarting; a router answers requests from it without lookups while it is exact,
 * and falls back to lookups, failing nothing, when the events are cut.
 */
import { assert, assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { createRouter } from "../../routes/app.ts";
import { systemTimers } from "../../src/cluster/timers.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import { crossCheck, mirrorLookup, PoolMirror } from "../../src/kv/events/pool_mirror.ts";
import { MooncakeClient } from "../../src/kv/mooncake_client.ts";
import { zmtpSockets } from "../../src/runtime/kv_event_sockets.ts";
import { MasterEventFeed } from "../../src/runtime/master_event_feed.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { eventually } from "../support/eventually.ts";
import { startKillableProxy } from "../fakes/killable_proxy.ts";
import { startRealMaster, startStoreClient } from "./mooncake_master.ts";
import { freePort } from "./real_env.ts";
import { startPublisher } from "./zmq_publisher.ts";
import { decode, encode } from "@msgpack/msgpack";

/** The first event map of the real master's recording, the shape every event here copies. */
const RECORDED_EVENT = (() => {
  const text = Deno.readTextFileSync(
    new URL("../data/mooncake_master_kv_events.txt", import.meta.url),
  );
  const base64 = text.match(/^frame 2 base64: (.+)$/m)![1];
  const [, events] = decode(Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)), {
    useBigInt64: true,
  }) as [unknown, Record<string, unknown>[]];
  return events[0];
})();

/** The master's own events: the store, plus a publisher announcing what is done to it. */
async function masterWithEvents() {
  const master = await startRealMaster();
  const client = await startStoreClient("127.0.0.2", master);
  const eventsPort = freePort();
  const endpoint = `tcp://127.0.0.1:${eventsPort}`;
  const replay = `tcp://127.0.0.1:${freePort()}`; // unused: the master keeps no replay buffer
  let publisher = await startPublisher(endpoint, replay);
  let seq = 0;
  const announce = async (type: "BlockStored" | "BlockRemoved", keys: string[]) => {
    const events = keys.map((key) => ({
      ...RECORDED_EVENT,
      type,
      event_type: type === "BlockStored" ? "stored" : "removed",
      object_key: key,
    }));
    await publisher.raw(++seq, encode([Date.now(), events, 0], { useBigInt64: true }));
  };
  return {
    master,
    eventsPort,
    async put(keys: string[]) {
      await client.put(keys);
      await announce("BlockStored", keys);
    },
    async remove(keys: string[]) {
      await client.remove(keys);
      await announce("BlockRemoved", keys);
    },
    /** The master restarts (an empty store); its publisher starts again from seq 1. */
    async restart() {
      await publisher.stop();
      await master.restart();
      publisher = await startPublisher(endpoint, replay);
      seq = 0;
    },
    async close() {
      await publisher.stop();
      await client.close();
      await master.stop();
    },
  };
}

const allKeys = (master: { url: string }) => async () => {
  const response = await fetch(`${master.url}/get_all_keys`);
  if (!response.ok) return null;
  return (await response.text()).split("\n").map((l) => l.trim()).filter((l) => l !== "");
};

Deno.test("real mooncake_master KV events: the pool mirror follows the store, through a cut and a restart", async () => {
  const store = await masterWithEvents();
  const { master, eventsPort } = store;
  const proxy = startKillableProxy(eventsPort);
  const mirror = new PoolMirror();
  const feed = new MasterEventFeed({
    endpoint: `tcp://127.0.0.1:${proxy.port}`,
    mirror,
    sockets: zmtpSockets({ reconnectMs: 100 }),
    snapshot: allKeys(master),
    timers: systemTimers(),
    now: () => performance.now(),
    resyncIntervalMs: 500,
    log: () => {},
  });
  const keys = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}_${i}`);
  try {
    const early = keys("early", 50);
    await store.put(early); // before anyone listens: the first snapshot brings them
    feed.start();
    await eventually(
      () => mirror.state === "exact" && early.every((k) => mirror.has(k)),
      30_000,
      () => `the first snapshot (${mirror.state}, ${mirror.size} keys)`,
    );
    const later = keys("later", 200);
    await store.put(later);
    await store.remove(early.slice(0, 10));
    await eventually(
      () => later.every((k) => mirror.has(k)) && early.slice(0, 10).every((k) => !mirror.has(k)),
      30_000,
      () => `the events of 200 puts and 10 removals (${mirror.size} keys)`,
    );
    const asked = [...early, ...later, "absent_0"];
    const stored = await new MooncakeClient({ url: master.url, deadlineMs: 10_000 }).lookup(asked);
    crossCheck(mirror, mirrorLookup(mirror, asked), stored);
    assertEquals(mirror.lookups.keysDisagreed, 0, "the mirror agrees with the master, key by key");
    assertEquals(mirror.lookups.keysAgreed, asked.length);

    // The events cut: untrusted at once; back, a snapshot brings what was put meanwhile.
    proxy.kill();
    await eventually(() => mirror.state === "untrusted", 10_000, "the cut noticed");
    const during = keys("during", 20);
    await store.put(during);
    proxy.revive();
    await eventually(
      () => mirror.state === "exact" && during.every((k) => mirror.has(k)),
      30_000,
      "the snapshot after the cut",
    );

    // The master restarts with an empty store, its publisher from seq 1: the mirror empties too.
    const snapshots = mirror.counters.snapshots;
    await store.restart();
    await eventually(
      () =>
        mirror.state === "exact" && mirror.counters.snapshots > snapshots &&
        mirror.has("later_0") === false,
      30_000,
      () => `the mirror of the restarted master (${mirror.state}, ${mirror.size} keys)`,
    );
  } finally {
    await feed.stop();
    await proxy.close();
    await store.close();
  }
});

Deno.test("real mooncake_master KV events: a router skips the lookup while the mirror is exact and falls back when cut", async () => {
  const store = await masterWithEvents();
  const { master, eventsPort } = store;
  const proxy = startKillableProxy(eventsPort);
  const engines = await Promise.all(
    [0, 1].map((i) =>
      startFakeEngine({ id: `e${i}`, model: "m", timeScale: 0.001, decodeSecondsPerToken: 0.001 })
    ),
  );
  const router = await createRouter(
    resolveConfig({
      listen: { port: 0 },
      models: [{
        name: "m",
        tokenizer: { mode: "none" },
        kv: {
          store: "mooncake",
          url: master.url,
          chunkSize: 16,
          minPromptTokens: 0,
          timeoutMs: 2_000,
          masterEvents: { endpoint: `tcp://127.0.0.1:${proxy.port}`, crossCheckRate: 0.25 },
        },
        policy: "cache_aware",
        health: { intervalMs: 60_000, timeoutMs: 500 },
        instances: engines.map((e, i) => ({ id: e.id, url: e.url, kvHost: `127.0.0.${i + 2}` })),
      }],
    }),
    { log: () => {} },
  );
  const scheme = createKeyScheme({
    hash: "sha256_cbor",
    seed: "0",
    chunkSize: 16,
    keyFormat: "llumnix",
  });
  const runtime = router.registry.runtime("m")!;
  const mirror = runtime.poolMirror!;
  try {
    const { port } = await router.serve({ hostname: "127.0.0.1", port: 0 });
    const url = `http://127.0.0.1:${port}`;
    const prompt = (n: number) => Array.from({ length: 64 }, (_, i) => 100 + n * 1000 + i);
    for (let n = 0; n < 10; n++) await store.put(scheme.keys(prompt(n)));
    // Every prompt's keys: the master's events need not arrive in the order of the puts.
    const all = Array.from({ length: 10 }, (_, n) => scheme.keys(prompt(n))).flat();
    await eventually(
      () => mirror.state === "exact" && all.every((k) => mirror.has(k)),
      30_000,
      "the router's mirror",
    );
    const send = async (n: number) => {
      const response = await fetch(`${url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", prompt: prompt(n), max_tokens: 2 }),
      });
      await response.body?.cancel();
      return response.status;
    };
    const answered = mirror.lookups.answered;
    const statuses = [];
    for (let n = 0; n < 40; n++) statuses.push(await send(n % 10));
    assertEquals(statuses.filter((s) => s !== 200), []);
    // Every request was answered by the mirror; about a quarter (crossCheckRate) also asked the
    // master, to check the mirror against it.
    const fromMirror = mirror.lookups.answered - answered;
    assertEquals(fromMirror + mirror.lookups.crossChecked, 40);
    assert(mirror.lookups.crossChecked > 0 && fromMirror > 20, JSON.stringify(mirror.lookups));
    assertEquals(mirror.lookups.keysDisagreed, 0);
    assert(mirror.lookups.keysAgreed >= 4 * mirror.lookups.crossChecked);

    // Events cut: lookups again, and every request still served.
    proxy.kill();
    await eventually(() => mirror.state === "untrusted", 10_000, "the cut noticed");
    const before = mirror.lookups.answered;
    for (let n = 0; n < 20; n++) statuses.push(await send(n % 10));
    assertEquals(statuses.filter((s) => s !== 200), []);
    assertEquals(mirror.lookups.answered, before, "no answer from an untrusted mirror");
    const metrics = await (await fetch(`${url}/metrics`)).text();
    const lookedUp = (outcome: string) =>
      Number(
        metrics.match(
          new RegExp(`tidegate_store_lookups_total\\{model="m",outcome="${outcome}"\\} (\\d+)`),
        )?.[1] ?? 0,
      );
    assertEquals(lookedUp("mirror"), fromMirror);
    assertEquals(lookedUp("ok"), mirror.lookups.crossChecked + 20, "the cut's 20 were looked up");
  } finally {
    await router.close();
    await proxy.close();
    await Promise.all(engines.map((e) => e.close()));
    await store.close();
  }
});

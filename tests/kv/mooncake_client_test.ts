import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { MooncakeClient, type MooncakeClientOptions } from "../../src/kv/mooncake_client.ts";
import { StoreHealth } from "../../src/kv/store_health.ts";
import {
  type FakeMooncakeMaster,
  startFakeMooncakeMaster,
} from "../../src/fakes/fake_mooncake_master.ts";
import { eventually } from "../support/eventually.ts";

/** A monotonic clock the test can jump forward (to cross a 30 s down-window instantly). */
function jumpClock() {
  let offset = 0;
  return { now: () => performance.now() + offset, jump: (ms: number) => (offset += ms) };
}

async function withMaster(
  fn: (master: FakeMooncakeMaster) => Promise<void>,
): Promise<void> {
  const master = await startFakeMooncakeMaster();
  try {
    await fn(master);
  } finally {
    await master.close();
  }
}

function client(master: FakeMooncakeMaster, options: Partial<MooncakeClientOptions> = {}) {
  return new MooncakeClient({ url: master.url, deadlineMs: 1_000, ...options });
}

const keysOf = (n: number, prefix = "k") => Array.from({ length: n }, (_, i) => `${prefix}${i}_0`);

Deno.test("MooncakeClient splits 300 keys into 3 concurrent requests of at most 128 and merges them", async () => {
  await withMaster(async (master) => {
    const keys = keysOf(300);
    master.put("k0_0", "10.0.0.1:12345");
    master.put("k150_0", "10.0.0.2:12345");
    master.put("k299_0", "[fe80::1]:12345");
    await master.setMode("slow");
    master.setDelayMs(60);
    const result = await client(master).lookup(keys);
    strictEqual(result.outcome, "ok");
    strictEqual(result.batches, 3);
    strictEqual(result.attempts, 3);
    strictEqual(result.keysQueried, 300);
    deepStrictEqual(master.requests.map((r) => r.keys.length), [128, 128, 44]);
    strictEqual(master.maxInFlight, 3, "the three batches were in flight together");
    strictEqual(result.locations.size, 300);
    deepStrictEqual(result.locations.get("k0_0")?.memoryHosts, ["10.0.0.1"]);
    deepStrictEqual(result.locations.get("k150_0")?.memoryHosts, ["10.0.0.2"]);
    deepStrictEqual(result.locations.get("k299_0")?.memoryHosts, ["fe80::1"]);
    strictEqual(result.locations.get("k1_0")?.present, false);
  });
});

Deno.test("MooncakeClient asks once per distinct key and honours a configured batch size", async () => {
  await withMaster(async (master) => {
    const result = await client(master, { batchSize: 2 }).lookup(["a", "b", "a", "c"]);
    strictEqual(result.keysQueried, 3);
    deepStrictEqual(master.requests.map((r) => r.keys), [["a", "b"], ["c"]]);
  });
});

Deno.test("MooncakeClient sends plain keys unescaped and percent-encodes the others", async () => {
  await withMaster(async (master) => {
    const plain = "Qwen/Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@ab12_0";
    const spaced = "my model@ab12";
    master.put(plain, "10.0.0.1:1");
    master.put(spaced, "10.0.0.2:1");
    const result = await client(master).lookup([plain, spaced]);
    strictEqual(master.requests[0].rawQuery, `keys=${plain},my%20model%40ab12`);
    strictEqual(result.locations.get(plain)?.present, true);
    strictEqual(result.locations.get(spaced)?.present, true, "v0.3.12+ decodes the escaped key");
  });
});

Deno.test("MooncakeClient reads a v0.3.9-0.3.11 master; escaped keys are only found on v0.3.12+", async () => {
  await withMaster(async (master) => {
    await master.setMode("old_version");
    master.put("plain_0", "10.0.0.1:1");
    master.put("my model", "10.0.0.1:1");
    const result = await client(master).lookup(["plain_0", "my model", "gone_0"]);
    strictEqual(result.outcome, "ok");
    deepStrictEqual(result.locations.get("plain_0")?.memoryHosts, ["10.0.0.1"]);
    strictEqual(result.locations.get("gone_0")?.error, "OBJECT_NOT_FOUND");
    // The old master looked up the literal "my%20model"; its answer is filed under our key.
    strictEqual(result.locations.get("my model")?.present, false);
    deepStrictEqual(master.requests[0].keys, ["plain_0", "my%20model", "gone_0"]);
  });
});

Deno.test("MooncakeClient reports local-disk, shared-disk and not-ready keys as the store does", async () => {
  await withMaster(async (master) => {
    master.put("ssd", "10.0.0.3:15000", { tier: "local_disk" });
    master.put("nfs", "", { tier: "shared_disk" });
    master.put("busy", "10.0.0.1:1", { ready: false });
    const { locations } = await client(master).lookup(["ssd", "nfs", "busy"]);
    deepStrictEqual(locations.get("ssd")?.localDiskHosts, ["10.0.0.3"]);
    strictEqual(locations.get("ssd")?.present, true);
    strictEqual(locations.get("nfs")?.sharedDisk, true);
    strictEqual(locations.get("busy")?.present, false);
    strictEqual(locations.get("busy")?.error, "REPLICA_IS_NOT_READY");
  });
});

Deno.test("MooncakeClient returns by the deadline with a slow master, then skips it after repeated misses", async () => {
  await withMaster(async (master) => {
    await master.setMode("slow");
    master.setDelayMs(1_000);
    const health = new StoreHealth({ deadlinesToOpen: 2 });
    const mooncake = client(master, { deadlineMs: 50, health });
    for (let i = 0; i < 2; i++) {
      const started = performance.now();
      const result = await mooncake.lookup(keysOf(3));
      const took = performance.now() - started;
      strictEqual(result.outcome, "deadline");
      ok(took < 50 + 120, `returned after ${took.toFixed(1)} ms`);
      ok(result.error?.includes("deadline of 50 ms"), result.error);
    }
    strictEqual(health.state, "down");
    const sent = master.count;
    const skipped = await mooncake.lookup(keysOf(3));
    strictEqual(skipped.outcome, "store_down");
    strictEqual(skipped.attempts, 0);
    ok(skipped.error?.includes("deadline"), skipped.error);
    strictEqual(master.count, sent, "no request reached the master");
  });
});

Deno.test("MooncakeClient does not blame the store for a deadline its own busy event loop missed", async () => {
  await withMaster(async (master) => {
    await master.setMode("slow");
    master.setDelayMs(1_000);
    const health = new StoreHealth({ deadlinesToOpen: 2 });
    const mooncake = client(master, { deadlineMs: 20, health });
    for (let i = 0; i < 3; i++) {
      const pending = mooncake.lookup(keysOf(3));
      const busyUntil = performance.now() + 80; // the router's loop is busy: the timer fires late
      while (performance.now() < busyUntil) { /* other requests' work */ }
      const result = await pending;
      strictEqual(result.outcome, "deadline");
      ok(result.error?.includes("event loop ran"), result.error);
    }
    strictEqual(health.state, "up", "late timers are the router's fault, not the store's");
  });
});

Deno.test("MooncakeClient keeps the batches that answered when another misses the deadline", async () => {
  await withMaster(async (master) => {
    master.put("k0_0", "10.0.0.1:1");
    let calls = 0;
    const slowSecondBatch: typeof fetch = async (input, init) => {
      if (++calls === 2) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 500);
          init?.signal?.addEventListener("abort", () => {
            clearTimeout(timer);
            resolve();
          });
        });
        throw new DOMException("aborted", "AbortError");
      }
      return await fetch(input, init);
    };
    const result = await client(master, { fetch: slowSecondBatch, batchSize: 2, deadlineMs: 80 })
      .lookup(keysOf(4));
    strictEqual(result.outcome, "deadline");
    strictEqual(result.locations.get("k0_0")?.present, true);
    strictEqual(result.locations.has("k2_0"), false, "the unanswered batch is absent");
    ok(result.error?.includes("1 of 2 batches unanswered"), result.error);
  });
});

for (
  const [mode, expected, attempts] of [
    ["standby503", "list every master of the HA group in kv.url", 1],
    ["metadata_port", "404", 1],
    ["garbage", "invalid JSON", 3],
    ["http500", "HTTP 500", 3],
    ["down", "cannot reach the Mooncake master", 3],
  ] as const
) {
  Deno.test(`MooncakeClient fails after ${attempts} attempt(s) in ${mode} mode and then stops asking`, async () => {
    await withMaster(async (master) => {
      await master.setMode(mode);
      const health = new StoreHealth({ downWindowMs: 30_000 });
      const mooncake = client(master, { health, maxAttempts: 3, retryBackoffMs: 1 });
      const result = await mooncake.lookup(keysOf(2));
      strictEqual(result.outcome, "failed");
      ok(result.error?.includes(expected), result.error);
      strictEqual(result.attempts, attempts, "a standby's 503 or a 404 is not asked again");
      if (mode !== "down") strictEqual(master.count, attempts, "each attempt reached the master");
      strictEqual(health.state, "down");
      await master.setMode("ok");
      const before = master.count;
      const skipped = await mooncake.lookup(keysOf(2));
      strictEqual(skipped.outcome, "store_down");
      strictEqual(master.count, before, "no request while the store is down");
    });
  });
}

Deno.test("MooncakeClient probes once after the down-window and resumes when the master is back", async () => {
  await withMaster(async (master) => {
    master.put("k0_0", "10.0.0.1:1");
    const clock = jumpClock();
    const health = new StoreHealth({ downWindowMs: 30_000 });
    const mooncake = client(master, { health, now: clock.now, retryBackoffMs: 1 });
    await master.setMode("standby503");
    strictEqual((await mooncake.lookup(keysOf(1))).outcome, "failed");
    await master.setMode("ok");
    strictEqual((await mooncake.lookup(keysOf(1))).outcome, "store_down");
    clock.jump(30_000);
    const before = master.count;
    const probe = await mooncake.lookup(keysOf(1));
    strictEqual(probe.outcome, "ok");
    strictEqual(probe.locations.get("k0_0")?.present, true);
    strictEqual(master.count, before + 1);
    strictEqual(health.state, "up");
    strictEqual(health.snapshot().recovered, 1);
    strictEqual((await mooncake.lookup(keysOf(1))).outcome, "ok");
  });
});

Deno.test("MooncakeClient retries a failed attempt inside the deadline", async () => {
  await withMaster(async (master) => {
    master.put("k0_0", "10.0.0.1:1");
    let calls = 0;
    const flaky: typeof fetch = (input, init) =>
      ++calls === 1 ? Promise.reject(new TypeError("connection reset")) : fetch(input, init);
    const result = await client(master, { fetch: flaky, deadlineMs: 500 }).lookup(keysOf(1));
    strictEqual(result.outcome, "ok");
    strictEqual(result.attempts, 2);
    strictEqual(result.locations.get("k0_0")?.present, true);
  });
});

Deno.test("MooncakeClient does not retry a 400, which only a code fix can cure", async () => {
  let calls = 0;
  const badRequest: typeof fetch = () => {
    calls++;
    return Promise.resolve(
      new Response(`{"success":false,"error":"No keys provided. Use ?keys=key1,key2,..."}`, {
        status: 400,
      }),
    );
  };
  const result = await new MooncakeClient({ url: "http://127.0.0.1:9", fetch: badRequest })
    .lookup(["a"]);
  strictEqual(result.outcome, "failed");
  strictEqual(calls, 1);
  ok(result.error?.includes("No keys provided"), result.error);
});

Deno.test("MooncakeClient skips an empty key list and rejects comma keys without any request", async () => {
  await withMaster(async (master) => {
    const mooncake = client(master);
    const empty = await mooncake.lookup([]);
    strictEqual(empty.outcome, "skipped");
    const comma = await mooncake.lookup(["ok_0", "bad,key"]);
    strictEqual(comma.outcome, "failed");
    ok(comma.error?.includes("comma"), comma.error);
    strictEqual(master.count, 0);
    strictEqual(mooncake.health.state, "up", "a bad key is not the store's fault");
  });
});

Deno.test("MooncakeClient returns at once when its caller aborts, without blaming the store", async () => {
  await withMaster(async (master) => {
    await master.setMode("slow");
    master.setDelayMs(1_000);
    const mooncake = client(master, { deadlineMs: 2_000 });
    const controller = new AbortController();
    const started = performance.now();
    const pending = mooncake.lookup(keysOf(2), { signal: controller.signal });
    await eventually(() => master.count === 1, 2_000, "the lookup at the master");
    controller.abort();
    const result = await pending;
    ok(performance.now() - started < 500);
    strictEqual(result.outcome, "deadline");
    ok(result.error?.includes("aborted by the caller"), result.error);
    strictEqual(mooncake.health.snapshot().deadlines, 0);
    strictEqual(mooncake.health.state, "up");
  });
});

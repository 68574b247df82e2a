import { assert, assertEquals } from "../assert.ts";
import { completion, range, startTestCluster } from "../support/harness.ts";

const PREFIX = range(100_000, 8192); // a new shared 8k-token prefix (32 chunks of 256)

interface Landed {
  instance: string;
  hitTokens: number;
}

/**
 * 20 concurrent requests sharing PREFIX, each with its own 64-token suffix. The store is asked
 * but never learns the keys (as while the first engine is still prefilling and writing), so
 * only the router's predicted index can tell where the prefix is being written.
 */
async function burst(policy: string, predicted: boolean): Promise<Landed[]> {
  const t = await startTestCluster({
    engines: 3,
    engine: { timeScale: 0.01 },
    model: { policy },
    kv: { chunkSize: 256, timeoutMs: 2_000, predictedIndex: { enabled: predicted } },
  });
  try {
    const responses = await Promise.all(
      Array.from(
        { length: 20 },
        (_, i) =>
          completion(t.url, {
            prompt: [...PREFIX, ...range(1_000_000 + 64 * i, 64)],
            max_tokens: 2,
          }),
      ),
    );
    const landed: Landed[] = [];
    for (const response of responses) {
      assertEquals(response.status, 200);
      await response.body?.cancel();
      landed.push({
        instance: response.headers.get("x-tidegate-instance")!,
        hitTokens: Number(response.headers.get("x-tidegate-hit-tokens")),
      });
    }
    assert(t.master.count > 0, "the store was asked (and knew nothing)");
    return landed;
  } finally {
    await t.close();
  }
}

const instancesOf = (landed: Landed[]) => new Set(landed.map((l) => l.instance)).size;

Deno.test("a burst of 20 requests sharing a new 8k-token prefix lands on one instance with the predicted index, and scatters without it", async () => {
  // kv_hit_len follows the longest prefix, so it shows what the index tells the dispatcher.
  const on = await burst("kv_hit_len", true);
  const off = await burst("kv_hit_len", false);
  assertEquals(instancesOf(on), 1, JSON.stringify(on));
  assertEquals(on.filter((l) => l.hitTokens === 8192).length, 19, "every follower sees it");
  assertEquals(instancesOf(off), 3, JSON.stringify(off));
  assert(off.every((l) => l.hitTokens === 0));
});

Deno.test("with cache_aware a burst's followers see the prefix on the instances already writing it", async () => {
  // cache_aware scores waiting-behind-the-writer (its queued prefill + the suffix) and computing
  // the prefix anew alike, so it spreads the first requests by load; every later one then goes
  // where the prefix is being written instead of computing it again.
  const on = await burst("cache_aware", true);
  const off = await burst("cache_aware", false);
  const writers = instancesOf(on);
  assertEquals(on.filter((l) => l.hitTokens === 8192).length, 20 - writers, JSON.stringify(on));
  assert(off.every((l) => l.hitTokens === 0));
});

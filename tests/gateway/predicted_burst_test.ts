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

Deno.test("an attempt that fails takes back its own prediction only: a request already prefilling the prefix there still counts", async () => {
  const t = await startTestCluster({
    engines: 2,
    model: { policy: "kv_hit_len" },
    kv: { chunkSize: 256, store: "none" }, // the router's own predictions only
  });
  const prompt = (question: number) => [...PREFIX, ...range(question, 64)];
  const first = new AbortController();
  try {
    // The first request prefills the prefix and keeps its stream open (its first token sent).
    for (const engine of t.engines) await engine.setFailure("stall", { allEndpoints: false });
    const open = await completion(
      t.url,
      { prompt: prompt(1_000_000), stream: true },
      {},
      first.signal,
    );
    assertEquals(open.status, 200);
    const holder = open.headers.get("x-tidegate-instance")!;
    const other = holder === "e0" ? "e1" : "e0";
    await t.engines.find((e) => e.id === holder)!.setFailure("http500", { allEndpoints: false });
    await t.engines.find((e) => e.id === other)!.setFailure("none");
    // The second follows it there, gets a 500 and is retried on the other instance.
    const retried = await completion(t.url, { prompt: prompt(2_000_000), max_tokens: 2 });
    assertEquals(retried.status, 200, await retried.text());
    assertEquals(retried.headers.get("x-tidegate-instance"), other);
    const [decision] = t.router.decisions.recent(1);
    assertEquals(decision.attempts.map((a) => a.instance), [holder, other]);
    const third = await completion(t.url, { prompt: prompt(3_000_000), max_tokens: 2 });
    await third.body?.cancel();
    const [last] = t.router.decisions.recent(1);
    const onHolder = last.candidates.find((c) => c.id === holder);
    assertEquals(onHolder?.localPrefixTokens, 8192, "the first request's prediction stands");
  } finally {
    first.abort();
    await t.close();
  }
});

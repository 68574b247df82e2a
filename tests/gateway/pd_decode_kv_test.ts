/**
 * Decode admission on the decode engines' own KV (docs/disaggregation.md, "Admission"): a batch
 * of long contexts steps slower than its size says, and the router reads that from the engines'
 * `/metrics` (KV usage times the cache size in `cache_config_info`).
 */
import { assert, assertEquals } from "../assert.ts";
import { range } from "../support/harness.ts";
import { MODEL, type PdCluster, startPdCluster } from "../support/pd_cluster.ts";
import { eventually } from "../support/eventually.ts";

const CONTEXT = 40_000;

/** A P/D cluster whose decode engines decode slowly (50 ms a token), judged `early`. */
function cluster(decodeModel: Record<string, number>, decodeMaxBatch?: number) {
  return startPdCluster(
    "vllm-nixl",
    {
      slo: { ttftS: 60, tbtS: 0.05, admission: true },
      disaggregation: {
        protocol: "vllm-nixl",
        earlyRejection: "early",
        decodeModel,
        ...(decodeMaxBatch ? { decodeMaxBatch } : {}),
      },
    },
    {},
    { decode: { timeScale: 0.001, decodeSecondsPerToken: 50 } },
  );
}

/**
 * Two requests of `CONTEXT` prompt tokens decoding on each decode engine (sent to them directly,
 * served as plain requests), until the returned call aborts them.
 */
async function longContexts(t: PdCluster): Promise<() => Promise<void>> {
  const abort = new AbortController();
  const streams = t.decode.flatMap((engine) =>
    range(0, 2).map(() =>
      fetch(`${engine.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, prompt: range(0, CONTEXT), max_tokens: 2_000 }),
        signal: abort.signal,
      }).then((r) => r.body?.cancel()).catch(() => {})
    )
  );
  const cluster = t.router.registry.runtime(MODEL)!.cluster;
  await eventually(
    async () => {
      await cluster.refresh();
      // Both decoding (the fake prefills one at a time): 80k of its 200k tokens in use.
      return t.decode.every((e) =>
        (cluster.kvUsage(e.id) ?? 0) >= 2 * CONTEXT / 200_000 &&
        (cluster.kvTokensPerRequest(e.id) ?? 0) >= CONTEXT
      );
    },
    10_000,
    "two long contexts decoding on each decode engine",
  );
  return async () => {
    abort.abort();
    await Promise.all(streams);
  };
}

async function send(url: string): Promise<Response> {
  return await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, prompt: range(1, 64), max_tokens: 2 }),
  });
}

Deno.test("P/D admission: a decode batch of long contexts refuses by its engines' reported KV, not by its size", async () => {
  // 30 ms + 0.5 ms a request + 0.25 ms per thousand KV tokens: three requests step in 31.5 ms
  // by their number alone, in 51.5 ms with two 40k-token contexts among them.
  for (const [perKvTokenS, status] of [[0, 200], [2.5e-7, 429]] as const) {
    const t = await cluster({ baseS: 0.03, perRequestS: 0.0005, perKvTokenS });
    try {
      const stop = await longContexts(t);
      const response = await send(t.url);
      const body = await response.json();
      const [decision] = t.router.decisions.recent(1);
      assertEquals(response.status, status, JSON.stringify({ perKvTokenS, body, pd: decision.pd }));
      if (status === 429) {
        assertEquals(body.error.code, "tbt_slo");
        assert(decision.pd!.predictedTbtS! > 0.05, JSON.stringify(decision.pd));
      }
      await stop();
    } finally {
      await t.close();
    }
  }
});

Deno.test("P/D admission: past the decode engines' batch cap a request is refused, with the cap named", async () => {
  const t = await cluster({ baseS: 0.03, perRequestS: 0.0005 }, 2);
  try {
    const stop = await longContexts(t);
    const response = await send(t.url);
    const { error } = await response.json();
    assertEquals(response.status, 429, JSON.stringify(t.router.decisions.recent(1)[0].pd));
    assertEquals(error.code, "tbt_slo");
    assert(error.message.includes("past its batch of 2"), error.message);
    await stop();
  } finally {
    await t.close();
  }
});

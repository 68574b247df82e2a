/**
 * Decode admission on the decode batches' KV (docs/disaggregation.md, "Admission"): a long
 * request's prompt, and a batch of long contexts, step slower than the batch's size says; the
 * router reads the batch's KV from the engines' `/metrics` (KV usage times the cache size in
 * `cache_config_info`).
 */
import { assert, assertEquals } from "../assert.ts";
import { range } from "../support/harness.ts";
import { MODEL, type PdCluster, startPdCluster } from "../support/pd_cluster.ts";
import { eventually } from "../support/eventually.ts";

const CONTEXT = 40_000;

/** A P/D cluster whose decode engines decode slowly (50 ms a token), judged `early`. */
function cluster(disaggregation: Record<string, unknown>) {
  return startPdCluster(
    "vllm-nixl",
    {
      slo: { ttftS: 60, tbtS: 0.05, admission: true },
      disaggregation: { protocol: "vllm-nixl", earlyRejection: "early", ...disaggregation },
    },
    {},
    { decode: { timeScale: 0.001, decodeSecondsPerToken: 50 } },
  );
}

/** Whether every decode engine last reported two `CONTEXT`-token requests decoding. */
async function longContextsReported(t: PdCluster): Promise<boolean> {
  const cluster = t.router.registry.runtime(MODEL)!.cluster;
  await cluster.refresh();
  // Both decoding (the fake prefills one at a time): 80k of its 200k tokens in use.
  return t.decode.every((e) =>
    (cluster.kvUsage(e.id) ?? 0) >= 2 * CONTEXT / 200_000 &&
    (cluster.kvTokensPerRequest(e.id) ?? 0) >= CONTEXT
  );
}

/**
 * Runs `check` while two requests of `CONTEXT` prompt tokens decode on each decode engine (sent
 * to them directly, served as plain requests), the router's reports fresh; then ends them.
 */
async function withLongContexts(t: PdCluster, check: () => Promise<void>): Promise<void> {
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
  try {
    await eventually(
      () => longContextsReported(t),
      30_000,
      "two long contexts decoding on each decode engine",
    );
    await check();
  } finally {
    abort.abort();
    await Promise.all(streams);
  }
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
  // by their number alone, in 51.5 ms with two 40k-token contexts among them; guessed at 1,000
  // tokens each, in 32 ms.
  const model = { baseS: 0.03, perRequestS: 0.0005, kvTokensPerRequest: 1000 };
  const cases = [
    { decodeModel: { ...model, perKvTokenS: 0 }, status: 200 },
    { decodeModel: { ...model, perKvTokenS: 2.5e-7 }, status: 429 },
    { decodeModel: { ...model, perKvTokenS: 2.5e-7 }, decodeBatchKv: "guess", status: 200 },
  ];
  for (const { status, ...disaggregation } of cases) {
    const t = await cluster(disaggregation);
    try {
      await withLongContexts(t, async () => {
        const response = await send(t.url);
        const body = await response.json();
        const [decision] = t.router.decisions.recent(1);
        const seen = JSON.stringify({ disaggregation, body, pd: decision.pd });
        assertEquals(response.status, status, seen);
        if (status === 429) {
          assertEquals(body.error.code, "tbt_slo");
          assert(decision.pd!.predictedTbtS! > 0.05, seen);
        }
      });
    } finally {
      await t.close();
    }
  }
});

Deno.test("P/D admission: past the decode engines' batch cap a request is refused, with the cap named", async () => {
  const t = await cluster({ decodeMaxBatch: 2 });
  try {
    await withLongContexts(t, async () => {
      const response = await send(t.url);
      const { error } = await response.json();
      assertEquals(response.status, 429, JSON.stringify(t.router.decisions.recent(1)[0].pd));
      assertEquals(error.code, "tbt_slo");
      assert(error.message.includes("past its batch of 2"), error.message);
    });
  } finally {
    await t.close();
  }
});

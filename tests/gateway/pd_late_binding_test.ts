/**
 * Late binding on a disaggregated model (`slo.queue.holdAboveTokens`): a request is held while
 * every prefill instance has prefill waiting, and goes as soon as a prefill leg answers, while the
 * request that leg served is still decoding.
 */
import { assertEquals } from "../assert.ts";
import { range } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import { MODEL, startPdCluster } from "../support/pd_cluster.ts";

/** Long enough that the third request is planned while both prefills still run. */
const PREFILL_MS = 3_000;

Deno.test("P/D late binding: a held request goes when a prefill leg answers, not when its request ends", async () => {
  const t = await startPdCluster("vllm-nixl", {
    kv: { store: "none" },
    // No recheck within the test: only a prefill's end can release the held request.
    slo: {
      ttftS: 60,
      admission: true,
      queue: { enabled: true, holdAboveTokens: 0, recheckMs: 600_000 },
    },
  });
  const clients: AbortController[] = [];
  const send = (first: number) => {
    const abort = new AbortController();
    clients.push(abort);
    fetch(`${t.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, prompt: range(first, 1_000), max_tokens: 2 }),
      signal: abort.signal,
    }).catch(() => {}); // its answer never comes: the decode instances hang
  };
  const onPrefill = () => t.prefill.reduce((n, e) => n + e.stats.requests.length, 0);
  const onDecode = () => t.decode.reduce((n, e) => n + e.stats.requests.length, 0);
  const waiting = () =>
    [...(t.router.gateway.queueLengths().get(MODEL)?.values() ?? [])].reduce((a, b) => a + b, 0);
  try {
    for (const engine of t.prefill) {
      await engine.setFailure("slow_first_byte", { delayMs: PREFILL_MS });
    }
    for (const engine of t.decode) await engine.setFailure("hang", { allEndpoints: false });
    send(1_000_000);
    send(2_000_000);
    await eventually(() => onPrefill() === 2, 10_000, "two prefills, one on each instance");
    send(3_000_000);
    await eventually(() => waiting() === 1, 10_000, "the third is held");
    for (const engine of t.prefill) await engine.setFailure("none"); // its own prefill is quick
    await eventually(() => onPrefill() === 3, 20_000, "the third goes to a prefill that answered");
    assertEquals(waiting(), 0);
    await eventually(() => onDecode() === 3, 20_000, "and on to a decode instance");
    assertEquals(t.router.gateway.inFlight, 3, "the first two still decode");
  } finally {
    for (const client of clients) client.abort();
    try {
      await eventually(() => t.router.gateway.inFlight === 0, 10_000, "every request ended");
    } finally {
      await t.close();
    }
  }
});

/**
 * The flow-control queue on a disaggregated model: a request the P/D admission refuses (the
 * prefill side's predicted TTFT over the SLO) waits, holding no reservation on either side, and
 * goes through a prefill and a decode instance once a prefill frees.
 */
import { assertEquals } from "../assert.ts";
import { range } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import { MODEL, type PdCluster, startPdCluster } from "../support/pd_cluster.ts";

/** Completions the test can abort, and the length of the model's queue. */
function clientOf(t: PdCluster) {
  const clients: AbortController[] = [];
  const send = (first: number, tokens: number) => {
    const abort = new AbortController();
    clients.push(abort);
    const response = fetch(`${t.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, prompt: range(first, tokens), max_tokens: 2 }),
      signal: abort.signal,
    });
    response.catch(() => {});
    return { abort, response };
  };
  const waiting = () =>
    [...(t.router.gateway.queueLengths().get(MODEL)?.values() ?? [])].reduce((a, b) => a + b, 0);
  const leave = () => clients.forEach((client) => client.abort());
  return { send, waiting, leave };
}

Deno.test("P/D: a refused request waits in the queue and is prefilled and decoded once a prefill frees", async () => {
  const t = await startPdCluster("vllm-nixl", {
    policy: "mooncake_ttft",
    kv: { store: "none" },
    prefillModel: { linear: 1, quadratic: 0, constant: 0 },
    slo: { ttftS: 20, admission: true, queue: { enabled: true } },
  });
  const { send, waiting, leave } = clientOf(t);
  const onPrefill = () => t.prefill.reduce((n, e) => n + e.stats.requests.length, 0);
  try {
    for (const engine of t.prefill) await engine.setFailure("hang", { allEndpoints: false });
    // Three 6,500-token prefills per prefill instance (1 s per 1k tokens): 19.5 s queued on
    // each, a 1,000-token request does not fit the 20 s SLO until one of them left (14 s).
    const holders = [];
    for (let i = 0; i < 6; i++) {
      holders.push(send(100_000 * (i + 1), 6_500));
      await eventually(() => onPrefill() === i + 1, 10_000, `prefill ${i + 1} sent`);
    }
    const waiter = send(900_000, 1_000);
    await eventually(() => waiting() === 1, 5_000, "the seventh waits");
    const account = t.router.registry.runtime(MODEL)!.cluster.account;
    const decodeLoad = () =>
      t.decode.reduce(
        (n, e) => n + account.load(e.id).prefillRequests + account.load(e.id).decodeRequests,
        0,
      );
    assertEquals(decodeLoad(), 6, "the six holders' decode reservations, none for the waiter");
    for (const engine of t.prefill) await engine.setFailure("none");
    holders[0].abort.abort();
    const answer = await waiter.response;
    assertEquals(answer.status, 200, await answer.clone().text());
    const body = await answer.json();
    assertEquals(body.object, "text_completion");
    assertEquals(answer.headers.get("x-tidegate-prefill-instance")?.startsWith("p"), true);
    assertEquals(answer.headers.get("x-tidegate-instance")?.startsWith("d"), true);
  } finally {
    leave();
    await eventually(() => t.router.gateway.inFlight === 0, 10_000, "every request ended");
    await t.close();
  }
});

/**
 * Four 6,500-token holders hang on the two prefill instances (two each, 13 s of prefill queued
 * there) and fill both decode batches of two (`committed` counts them from admission); a 1,000-
 * token request fits the TTFT SLO (14 s of 20) but not the decode batch: it waits, refused for
 * `tbt_slo`. The first holder then leaves: a decode place frees while a prefill still waits on
 * every prefill instance.
 */
async function decodeRefusedWaiter(admitWhen: string) {
  const t = await startPdCluster("vllm-nixl", {
    policy: "mooncake_ttft",
    kv: { store: "none" },
    prefillModel: { linear: 1, quadratic: 0, constant: 0 },
    disaggregation: { protocol: "vllm-nixl", decodeMaxBatch: 2 },
    slo: { ttftS: 20, admission: true, queue: { enabled: true, admitWhen } },
  });
  const { send, waiting, leave } = clientOf(t);
  const firsts = () =>
    t.prefill.flatMap((e) =>
      e.stats.requests.map((r) => (r.body as { prompt: number[] }).prompt[0])
    );
  for (const engine of t.prefill) await engine.setFailure("hang", { allEndpoints: false });
  const holders = [];
  for (let i = 0; i < 4; i++) {
    holders.push(send(100_000 * (i + 1), 6_500));
    await eventually(() => firsts().length === i + 1, 10_000, `prefill ${i + 1} sent`);
  }
  send(900_000, 1_000);
  await eventually(() => waiting() === 1, 5_000, "the fifth waits");
  const runtime = t.router.registry.runtime(MODEL)!;
  holders[0].abort.abort();
  await eventually(() => t.router.gateway.inFlight === 4, 5_000, "the first holder ended");
  const close = async () => {
    leave();
    await eventually(() => t.router.gateway.inFlight === 0, 10_000, "every request ended");
    await t.close();
  };
  return { runtime, firsts, waiting, close };
}

Deno.test("P/D, admitWhen cause: a request refused for the decode batch goes once the batch has room, though prefill waits", async () => {
  const run = await decodeRefusedWaiter("cause");
  try {
    await eventually(() => run.firsts().includes(900_000), 5_000, "the waiter reached a prefill");
    assertEquals(run.waiting(), 0);
  } finally {
    await run.close();
  }
});

Deno.test("P/D, admitWhen idle: the same request stays while prefill waits on its instance", async () => {
  const run = await decodeRefusedWaiter("idle");
  try {
    const plansBefore = run.runtime.sequence;
    await eventually(() => run.runtime.sequence >= plansBefore + 3, 5_000, "it was re-planned");
    assertEquals(run.waiting(), 1);
    assertEquals(run.firsts().includes(900_000), false);
  } finally {
    await run.close();
  }
});

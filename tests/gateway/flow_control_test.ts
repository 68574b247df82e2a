/**
 * The flow-control queue through the router (slo.queue): a request admission refuses waits and
 * goes to the engine once it fits within what its wait left of the TTFT SLO; more urgent bands
 * first; one that does not fit holds nobody back; one that could never fit is refused at once; a
 * TTL ends in 429 queue_timeout with Retry-After; a full queue answers 429 queue_full; a client
 * that leaves is dropped at once; draining answers 503 router_shutting_down; a reload keeps who
 * waits.
 */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import {
  completion,
  MODEL,
  range,
  startTestCluster,
  type TestCluster,
} from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";

/**
 * One second per 1k new tokens and a 20 s TTFT SLO: three 6,500-token holders queue 19.5 s, so a
 * 1,000-token request is refused (20.5 s) and fits once one holder left (14 s), with seconds to
 * spare for a busy machine.
 */
const SLO_S = 20;
const HOLDER = 6_500;

/** The default `admitWhen: "fits"`, said so: most tests are about what fits. */
function settings(queue: Record<string, unknown> = {}) {
  return {
    prefillModel: { linear: 1, quadratic: 0, constant: 0 },
    slo: {
      ttftS: SLO_S,
      admission: true,
      queue: { enabled: true, ttlS: 30, admitWhen: "fits", ...queue },
    },
  };
}

interface Held {
  t: TestCluster;
  /** The three requests holding the engine (19.5 s of prefill queued on the router). */
  holders: AbortController[];
  /** Every client the test started, aborted at the end. */
  clients: AbortController[];
}

/** A cluster whose one engine hangs, with three holders on it: little more fits. */
async function saturated(
  queue: Record<string, unknown> = {},
  top = {},
  kv?: Record<string, unknown>,
): Promise<Held> {
  // Without a store unless `kv` asks for the harness's (fake) Mooncake master.
  const model = kv ? settings(queue) : { ...settings(queue), kv: { store: "none" } };
  const t = await startTestCluster({ engines: 1, model, top, kv });
  const held: Held = { t, holders: [], clients: [] };
  await t.engines[0].setFailure("hang", { allEndpoints: false });
  for (let i = 0; i < 3; i++) {
    held.holders.push(await send(held, range(100_000 * (i + 1), HOLDER)).reached);
  }
  return held;
}

/** Sends a completion; `reached` resolves once the engine has it (rejects after 20 s). */
function send(held: Held, prompt: number[], headers: Record<string, string> = {}) {
  const abort = new AbortController();
  held.clients.push(abort);
  const response = completion(held.t.url, { prompt, max_tokens: 1 }, headers, abort.signal);
  response.catch(() => {});
  const reached = eventually(
    () => received(held).includes(prompt[0]),
    20_000,
    `the engine has the prompt starting ${prompt[0]}`,
  ).then(() => abort);
  reached.catch(() => {}); // awaited by the tests that expect it; others leave it be
  return { response, abort, reached };
}

/** First tokens of the prompts the engine received, in order. */
function received(held: Held): (number | undefined)[] {
  return held.t.engines[0].stats.requests.map((r) => firstToken(r.body));
}

function firstToken(body: unknown): number | undefined {
  const prompt = (body as { prompt?: unknown } | undefined)?.prompt;
  return Array.isArray(prompt) ? prompt[0] as number : undefined;
}

function waiting(held: Held): number {
  return [...(held.t.router.gateway.queueLengths().get(MODEL)?.values() ?? [])]
    .reduce((a, b) => a + b, 0);
}

async function end(held: Held): Promise<void> {
  for (const abort of held.clients) abort.abort();
  await eventually(() => held.t.router.gateway.inFlight === 0, 10_000, "every request ended");
  await held.t.close();
}

const WAITER = 1_000;

Deno.test("a request admission refuses waits in the queue and reaches the engine once a holder leaves", async () => {
  const held = await saturated();
  try {
    const waiter = send(held, range(9_000, WAITER));
    await eventually(() => waiting(held) === 1, 5_000, "it waits");
    assert(!received(held).includes(9_000));
    const metrics = await (await fetch(`${held.t.url}/metrics`)).text();
    assertMatch(metrics, new RegExp(`tidegate_queue_waiting\\{model="${MODEL}",priority="0"\\} 1`));
    const page = await (await fetch(`${held.t.url}/dashboard/data`)).json();
    assertEquals(page.models[0].queue, { waiting: 1, bands: [{ priority: 0, waiting: 1 }] });
    held.holders[0].abort(); // 13 s queued + 1 s fits what is left of the 20 s SLO
    await waiter.reached;
    assertEquals(waiting(held), 0);
    waiter.abort.abort();
    await eventually(() => held.t.router.gateway.inFlight === 2, 5_000, "the waiter ended");
    const after = await (await fetch(`${held.t.url}/metrics`)).text();
    assertMatch(
      after,
      new RegExp(
        `tidegate_queue_exits_total\\{model="${MODEL}",priority="0",cause="refused",result="admitted"\\} 1`,
      ),
    );
    assertMatch(
      after,
      new RegExp(
        `tidegate_queue_wait_seconds_count\\{model="${MODEL}",priority="0",cause="refused"\\} 1`,
      ),
    );
    assert(!/tidegate_queue_waiting\{[^}]*\} [1-9]/.test(after), "nobody waits any more");
    const hashed = after.match(/tidegate_stage_seconds_sum\{[^}]*stage="hash"[^}]*\} ([\d.e-]+)/);
    assert(!hashed || Number(hashed[1]) < 1, `the wait is not counted as hashing: ${hashed?.[1]}`);
  } finally {
    await end(held);
  }
});

for (const admitWhen of ["idle", "cause"]) {
  Deno.test(`with admitWhen ${admitWhen} a request refused for its TTFT that fits goes only once its instance has no prefill waiting; its re-plans that stay leave nothing behind`, async () => {
    const held = await saturated({ admitWhen });
    try {
      const runtime = held.t.router.registry.runtime(MODEL)!;
      const waiter = send(held, range(9_000, WAITER));
      await eventually(() => waiting(held) === 1, 5_000, "it waits");
      held.holders[0].abort(); // it would fit now (13 + 1 s), but two holders still prefill there
      await eventually(() => held.t.router.gateway.inFlight === 3, 5_000, "the holder ended");
      const plansBefore = runtime.sequence;
      await eventually(() => runtime.sequence >= plansBefore + 3, 5_000, "it was re-planned");
      assertEquals(waiting(held), 1);
      assert(!received(held).includes(9_000));
      // Its re-plans reserved nothing: the recent prefill sizes are the holders' alone.
      assertEquals(runtime.cluster.recentPrefill.mean(performance.now()), HOLDER);
      // A newcomer that fits goes at once; the waiter stays.
      const newcomer = await send(held, range(9_500, 100)).reached;
      assertEquals(waiting(held), 1);
      for (const holder of [held.holders[1], held.holders[2], newcomer]) holder.abort();
      await waiter.reached; // nothing waits to prefill there any more
      assertEquals(waiting(held), 0);
    } finally {
      await end(held);
    }
  });
}

Deno.test("a request no idle instance could serve within the SLO is refused at once, not queued", async () => {
  const held = await saturated();
  try {
    // 25k tokens: 25 s of prefill on an idle engine, past the 20 s SLO whatever the queue does.
    const answer = await completion(held.t.url, { prompt: range(500_000, 25_000) });
    assertEquals(answer.status, 429);
    assertEquals((await answer.json()).error.code, "ttft_slo");
    assertEquals(waiting(held), 0);
  } finally {
    await end(held);
  }
});

Deno.test("a more urgent band is admitted first though it came later; the client's ask is bounded by its tenant", async () => {
  const tenants = {
    tenants: {
      list: [
        { name: "batch", match: ["key-batch"], priority: 5 },
        { name: "live", match: ["key-live"], priority: 0, minPriority: -2 },
      ],
    },
  };
  const held = await saturated({}, tenants);
  try {
    const auth = (key: string) => ({ authorization: `Bearer ${key}` });
    // 4,000 tokens each: once a holder leaves, one fits (13 + 4 s), not both (13 + 8 s).
    // The batch tenant asks for band -9: it may not, it waits in its own band 5.
    const batch = send(held, range(20_000, 4_000), {
      ...auth("key-batch"),
      "x-tidegate-priority": "-9",
    });
    await eventually(() => waiting(held) === 1, 5_000, "batch waits");
    const live = send(held, range(30_000, 4_000), {
      ...auth("key-live"),
      "x-tidegate-priority": "-1",
    });
    await eventually(() => waiting(held) === 2, 5_000, "live waits");
    assertEquals(held.t.router.gateway.queueLengths().get(MODEL), new Map([[5, 1], [-1, 1]]));
    held.holders[0].abort();
    await live.reached;
    assertEquals(waiting(held), 1, "only one fits; the batch request still waits");
    (await live.reached).abort();
    await batch.reached;
  } finally {
    await end(held);
  }
});

Deno.test("a newcomer that fits goes at once, even past a more urgent request that waits", async () => {
  const held = await saturated();
  try {
    const urgent = send(held, range(9_000, 4_000), { "x-tidegate-priority": "-1" });
    await eventually(() => waiting(held) === 1, 5_000, "the urgent one waits");
    // 100 tokens: 19.5 + 0.1 s fits the SLO; the waiting one did not fit at its last re-plan.
    await send(held, range(9_500, 100)).reached;
    assertEquals(waiting(held), 1, "the urgent one still waits");
    held.holders[0].abort();
    await urgent.reached; // 13.1 + 4 s once a holder left
  } finally {
    await end(held);
  }
});

Deno.test("a waiting request that does not fit holds back none behind it that does", async () => {
  const held = await saturated();
  try {
    // 8,000 tokens: does not fit even after a holder leaves (13 + 8 s); 2,000 then do (15 s).
    const large = send(held, range(9_000, 8_000));
    await eventually(() => waiting(held) === 1, 5_000, "the large one waits");
    const small = send(held, range(9_500, 2_000));
    await eventually(() => waiting(held) === 2, 5_000, "the small one waits behind");
    held.holders[0].abort();
    await small.reached;
    assertEquals(waiting(held), 1);
    assert(!received(held).includes(9_000), "the large one still waits");
    large.abort.abort();
  } finally {
    await end(held);
  }
});

Deno.test("past its TTL (the client's shorter one) a waiting request gets 429 queue_timeout with Retry-After", async () => {
  const held = await saturated({ ttlS: 30 });
  try {
    const started = performance.now();
    const { response } = send(held, range(9_000, WAITER), { "x-tidegate-queue-ttl": "0.3" });
    const answer = await response;
    assertEquals(answer.status, 429);
    const body = await answer.json();
    assertEquals(body.error.code, "queue_timeout");
    assertMatch(
      body.error.message,
      /Not admitted within \d+\.\d s in the queue of model 'test-model' \(ttft_slo\)/,
    );
    assert(Number(answer.headers.get("retry-after")) >= 1);
    assert(performance.now() - started < 15_000, "the client's TTL, not the config's 30 s");
    const metrics = await (await fetch(`${held.t.url}/metrics`)).text();
    assertMatch(
      metrics,
      /tidegate_queue_exits_total\{model="test-model",priority="0",cause="refused",result="expired"\} 1/,
    );
    assertMatch(
      metrics,
      /tidegate_admission_rejections_total\{model="test-model",arm="default",reason="queue_timeout"\} 1/,
    );
    for (const ttl of ["soon", "0x10", "-1"]) {
      const bad = await completion(held.t.url, { prompt: range(9_500, 100) }, {
        "x-tidegate-queue-ttl": ttl,
      });
      assertEquals(bad.status, 400, ttl);
      assertEquals((await bad.json()).error.code, "invalid_queue_ttl");
    }
  } finally {
    await end(held);
  }
});

Deno.test("a full queue answers 429 queue_full at once", async () => {
  const held = await saturated({ maxRequests: 1 });
  try {
    send(held, range(9_000, WAITER));
    await eventually(() => waiting(held) === 1, 5_000, "the first waits");
    const full = await completion(held.t.url, { prompt: range(9_500, WAITER) });
    assertEquals(full.status, 429);
    const body = await full.json();
    assertEquals(body.error.code, "queue_full");
    assertMatch(body.error.message, /queue of model 'test-model' is full/);
    assertEquals(waiting(held), 1);
  } finally {
    await end(held);
  }
});

Deno.test("a full queue takes a more urgent request: the least urgent waiting one gets 429 queue_full", async () => {
  const held = await saturated({ maxRequests: 1 });
  try {
    const batch = send(held, range(9_000, WAITER), { "x-tidegate-priority": "5" });
    await eventually(() => waiting(held) === 1, 5_000, "the batch request waits");
    send(held, range(9_500, WAITER), { "x-tidegate-priority": "-1" });
    const pushedOut = await batch.response;
    assertEquals(pushedOut.status, 429);
    assertEquals((await pushedOut.json()).error.code, "queue_full");
    assertEquals(held.t.router.gateway.queueLengths().get(MODEL), new Map([[-1, 1]]));
    const metrics = await (await fetch(`${held.t.url}/metrics`)).text();
    assertMatch(
      metrics,
      new RegExp(
        `tidegate_queue_exits_total\\{model="${MODEL}",priority="5",cause="refused",result="pushed_out"\\} 1`,
      ),
    );
    assertMatch(
      metrics,
      new RegExp(
        `tidegate_admission_rejections_total\\{model="${MODEL}",arm="default",reason="queue_full"\\} 1`,
      ),
    );
    const equal = await completion(held.t.url, { prompt: range(9_700, WAITER) }, {
      "x-tidegate-priority": "-1",
    });
    assertEquals((await equal.json()).error.code, "queue_full", "no less urgent one to push out");
  } finally {
    await end(held);
  }
});

Deno.test("a client that leaves while queued is dropped at once, holding nothing", async () => {
  const held = await saturated();
  try {
    const before = held.t.router.gateway.inFlight;
    const waiter = send(held, range(9_000, WAITER));
    await eventually(() => waiting(held) === 1, 5_000, "it waits");
    waiter.abort.abort();
    await eventually(() => waiting(held) === 0, 5_000, "dropped from the queue");
    await eventually(() => held.t.router.gateway.inFlight === before, 5_000, "not carried on");
    held.holders[0].abort();
    const next = send(held, range(9_500, WAITER));
    await next.reached; // the freed room went to a newcomer, not to the client that left
    assert(!received(held).includes(9_000));
    const load = held.t.router.registry.runtime(MODEL)!.cluster.account.load("e0");
    assertEquals(load.prefillTokens, 2 * HOLDER + WAITER, "nothing of the one that left");
  } finally {
    await end(held);
  }
});

Deno.test("draining answers every waiting request 503 router_shutting_down, and newcomers are not queued", async () => {
  const held = await saturated();
  try {
    const { response } = send(held, range(9_000, WAITER));
    await eventually(() => waiting(held) === 1, 5_000, "it waits");
    const drained = held.t.router.drain({ readyDelayMs: 60_000, drainTimeoutMs: 60_000 });
    const answer = await response;
    assertEquals(answer.status, 503);
    assertEquals((await answer.json()).error.code, "router_shutting_down");
    const late = await completion(held.t.url, { prompt: range(9_500, WAITER) });
    assertEquals(late.status, 503);
    assertEquals((await late.json()).error.code, "router_shutting_down");
    drained.catch(() => {});
  } finally {
    await end(held);
  }
});

Deno.test("a reload keeps who waits: it is planned on the new runtime, whose queue bounds apply", async () => {
  const held = await saturated({ maxRequests: 5 });
  try {
    const waiter = send(held, range(9_000, WAITER));
    await eventually(() => waiting(held) === 1, 5_000, "it waits");
    const config = held.t.router.registry.config;
    const model = config.models[0];
    const reloaded = await held.t.router.reload({
      ...config,
      models: [{ ...model, slo: { ...model.slo, queue: { ...model.slo.queue, maxRequests: 1 } } }],
    });
    assert(reloaded.ok, JSON.stringify(reloaded));
    // A new runtime counts only what it dispatched (docs/limitations.md): the waiter fits there.
    await waiter.reached;
    for (let i = 0; i < 2; i++) await send(held, range(700_000 + 10_000 * i, HOLDER)).reached;
    // 1 + 13 s on the new runtime: one more holder does not fit and waits, the next finds it full.
    send(held, range(800_000, HOLDER));
    await eventually(() => waiting(held) === 1, 5_000, "a holder waits on the new runtime");
    const full = await completion(held.t.url, { prompt: range(900_000, HOLDER) });
    assertEquals((await full.json()).error.code, "queue_full");
  } finally {
    await end(held);
  }
});

Deno.test("a re-plan still looking the store up when draining ends the wait takes no reservation", async () => {
  // The store answers, slowly: the waiting request's re-plan is under way when the drain begins.
  const held = await saturated({}, {}, { timeoutMs: 20_000 });
  try {
    const { response } = send(held, range(9_000, WAITER));
    await eventually(() => waiting(held) === 1, 10_000, "it waits");
    const runtime = held.t.router.registry.runtime(MODEL)!;
    held.t.master.setDelayMs(1_500);
    await held.t.master.setMode("slow");
    const asked = held.t.master.count;
    const answered = runtime.store!.health.snapshot().successes;
    held.holders[0].abort(); // the waiting request is planned again, and would now be admitted
    await eventually(() => held.t.master.count > asked, 10_000, "the re-plan asks the store");
    held.t.router.drain({ readyDelayMs: 60_000, drainTimeoutMs: 60_000 }).catch(() => {});
    const answer = await response;
    assertEquals((await answer.json()).error.code, "router_shutting_down");
    await eventually(
      () => runtime.store!.health.snapshot().successes > answered,
      10_000,
      "the slow answer came in",
    );
    // Two holders are left; the re-plan that was admitted too late took nothing.
    assertEquals(runtime.cluster.account.load("e0").prefillRequests, 2);
  } finally {
    await end(held);
  }
});

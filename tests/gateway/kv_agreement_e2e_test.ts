/**
 * Live KV agreement end to end over loopback: fake engines with their own prefix cache
 * (tests/fakes/engine_kv_cache.ts) that report `cached_tokens` truthfully and publish what they
 * prefill to the fake master, hashed like the router, with another seed, or with another chunk
 * size. The router's own recent dispatches (predicted index) are off: they would vouch for the
 * follow-ups for `ttlMs` whatever the engines' keys, and the test is about the store's keys.
 */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import type { KvAgreementState } from "../../src/kv/kv_agreement.ts";
import type { KeySchemeOptions } from "../../src/hashing/types.ts";
import { EngineKvCache } from "../../src/fakes/engine_kv_cache.ts";
import {
  completion,
  MODEL,
  range,
  startTestCluster,
  type TestCluster,
  type TestClusterOptions,
} from "../support/harness.ts";

interface AgreementCluster extends TestCluster {
  caches: EngineKvCache[];
}

/** Engines hashing with `scheme` (undefined: no cache of their own, they report 0 cached). */
async function startAgreementCluster(
  scheme: Partial<KeySchemeOptions> | undefined,
  options: TestClusterOptions = {},
): Promise<AgreementCluster> {
  const caches: EngineKvCache[] = [];
  const t = await startTestCluster({
    ...options,
    engineOf: scheme
      ? (_i, host, master) => {
        const cache = new EngineKvCache({
          scheme,
          publish: (key) => master.put(key, `${host}:17000`),
          unpublish: (key) => master.remove(key),
        });
        caches.push(cache);
        return { kvCache: cache };
      }
      : undefined,
    kv: { predictedIndex: { enabled: false }, ...options.kv },
  });
  return { ...t, caches };
}

/** Request n: one of two documents (160 shared tokens) with its own 40-token question. */
const promptOf = (n: number) => [...range(100_000 + (n % 2) * 1_000, 160), ...range(n * 100, 40)];

function states(t: TestCluster): Record<string, KvAgreementState> {
  const agreement = t.router.registry.runtime(MODEL)!.agreement;
  return Object.fromEntries(t.engines.map((e) => [e.id, agreement.state(e.id)]));
}

async function send(t: TestCluster, prompt: number[]): Promise<Response> {
  const response = await completion(t.url, { prompt });
  await response.text();
  assertEquals(response.status, 200);
  return response;
}

/** Sends requests until `done` holds; returns how many it took (fails past `max`). */
async function sendUntil(t: TestCluster, done: () => boolean, max: number): Promise<number> {
  for (let n = 0; n <= max; n++) {
    if (done()) return n;
    await send(t, promptOf(n));
  }
  throw new Error(`not reached within ${max} requests: ${JSON.stringify(states(t))}`);
}

const some = (t: TestCluster, state: KvAgreementState) => () =>
  Object.values(states(t)).includes(state);

async function agreementGauges(t: TestCluster): Promise<string> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith("tidegate_kv_agreement{")).join("\n");
}

Deno.test("engines hashing like the router: agree, never blind or overpredicts", async () => {
  const t = await startAgreementCluster({ seed: "0", chunkSize: 16 });
  try {
    await sendUntil(t, some(t, "agree"), 40);
    for (let n = 0; n < 10; n++) await send(t, promptOf(n));
    for (const state of Object.values(states(t))) assert(["agree", "unknown"].includes(state));
    const agreeing = Object.entries(states(t)).find(([, s]) => s === "agree")![0];
    assertMatch(
      await agreementGauges(t),
      new RegExp(`model="${MODEL}",instance="${agreeing}",state="agree"} 1`),
    );
    const data = await (await fetch(`${t.url}/dashboard/data`)).json();
    const shown = data.models[0].instances.find((i: { id: string }) => i.id === agreeing);
    assertEquals(shown.kvAgreement.state, "agree");
  } finally {
    await t.close();
  }
});

for (
  const [drift, scheme] of [
    ["another seed", { seed: "1", chunkSize: 16 }],
    ["another chunk size", { seed: "0", chunkSize: 32 }],
  ] as const
) {
  Deno.test(`engines hashing with ${drift}: blind, logged with the command, in /metrics and the dashboard`, async () => {
    const t = await startAgreementCluster(scheme);
    try {
      await sendUntil(t, some(t, "blind"), 80);
      const blind = Object.entries(states(t)).find(([, s]) => s === "blind")![0];
      assertMatch(
        await agreementGauges(t),
        new RegExp(`model="${MODEL}",instance="${blind}",state="blind"} 1`),
      );
      const data = await (await fetch(`${t.url}/dashboard/data`)).json();
      const shown = data.models[0].instances.find((i: { id: string }) => i.id === blind);
      assertEquals(shown.kvAgreement.state, "blind");
      const line = t.logs.find((l) => l.fields?.instance === blind && l.fields?.to === "blind");
      assertMatch(line?.message ?? "", /seed, chunk size or key layout/);
      assertMatch(
        line?.message ?? "",
        /deno@2\.9\.6 task keys --detect --config .* --model test-model/,
      );
    } finally {
      await t.close();
    }
  });
}

Deno.test("engines that reuse nothing the store says they hold: overpredicts", async () => {
  const t = await startAgreementCluster(undefined);
  try {
    for (let i = 0; i < 3; i++) for (let d = 0; d < 2; d++) t.hold(i, promptOf(d), 10);
    await sendUntil(t, some(t, "overpredicts"), 30);
    assertMatch(await agreementGauges(t), /state="overpredicts"} 1/);
  } finally {
    await t.close();
  }
});

Deno.test("engines that report no usage stay unknown: no alarm, no log line", async () => {
  const t = await startAgreementCluster(undefined, { engine: { reportCachedTokens: false } });
  try {
    for (let i = 0; i < 3; i++) for (let d = 0; d < 2; d++) t.hold(i, promptOf(d), 10);
    for (let n = 0; n < 20; n++) await send(t, promptOf(n));
    assertEquals(Object.values(states(t)), ["unknown", "unknown", "unknown"]);
    assertEquals(t.logs.filter((l) => l.message.startsWith("KV agreement")), []);
  } finally {
    await t.close();
  }
});

/** A prompt whose router keys e1 holds, with e1 a little loaded: only its hits can pick it. */
async function holderTest(t: AgreementCluster, base: number) {
  const prompt = range(base, 200);
  t.hold(1, prompt, 12);
  const lease = t.router.registry.runtime(MODEL)!.cluster.account.lease("e1", 50);
  try {
    const response = await send(t, prompt);
    const [decision] = t.router.decisions.recent(1);
    return { instance: response.headers.get("x-tidegate-instance"), decision };
  } finally {
    lease.release();
  }
}

const loadOnlyCount = async (t: TestCluster) => {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  return Number(
    /tidegate_kv_load_only_dispatches_total\{model="test-model"\} (\d+)/.exec(text)?.[1] ?? 0,
  );
};

Deno.test("load_only: dispatch ignores the router's hits while blind, and recovers when agreement returns", async () => {
  const t = await startAgreementCluster({ seed: "1", chunkSize: 16 }, {
    kv: { onDisagreement: "load_only", predictedIndex: { enabled: false } },
  });
  try {
    const before = await holderTest(t, 500_000);
    assertEquals(before.instance, "e1", "agreement unknown: the hits decide");
    assertEquals(before.decision.kvLoadOnly, null);

    await sendUntil(t, some(t, "blind"), 80);
    const during = await holderTest(t, 600_000);
    assert(during.instance !== "e1", "blind: the holder is no longer preferred");
    assertMatch(during.decision.kvLoadOnly ?? "", /^kv_blind: /);
    assert(during.decision.candidates.every((c) => c.localPrefixTokens === 0));
    const counted = await loadOnlyCount(t);
    assert(counted >= 1, `load-only dispatches counted: ${counted}`);

    // The engines restart hashing like the router: agreement returns by itself.
    for (const cache of t.caches) cache.restart({ seed: "0", chunkSize: 16 });
    const took = await sendUntil(t, () => !some(t, "blind")(), 300);
    const released = await loadOnlyCount(t);
    const after = await holderTest(t, 700_000);
    assertEquals(after.instance, "e1", `agreement back after ${took} requests: hits decide again`);
    assertEquals(after.decision.kvLoadOnly, null);
    assertEquals(await loadOnlyCount(t), released, "no more load-only dispatches");
    assert(t.logs.some((l) => l.fields?.from === "blind"), "the release is logged");
  } finally {
    await t.close();
  }
});

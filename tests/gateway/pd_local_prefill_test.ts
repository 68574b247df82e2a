/**
 * Conditional disaggregation through the router (disaggregation.localPrefill): a request whose
 * uncached part is short on its decode instance, or (predicted) that the decode instance would
 * start sooner than a busy prefill side, is prefilled there: one plain request to the decode
 * instance, which the vLLM P/D fakes serve by prefilling locally, as vLLM does.
 */
import { assert, assertAlmostEquals, assertEquals, assertThrows } from "../assert.ts";
import { decodeStepS, DEFAULT_DECODE_MODEL } from "../../src/scheduling/decode_model.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import { range } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import { CHUNK, MODEL, type PdCluster, startPdCluster } from "../support/pd_cluster.ts";

async function send(t: PdCluster, prompt: number[]) {
  const response = await fetch(`${t.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, prompt, max_tokens: 3 }),
  });
  const text = await response.text();
  assertEquals(response.status, 200, text);
  return response;
}

const requestsOn = (engines: PdCluster["prefill"]) =>
  engines.reduce((n, e) => n + e.stats.requests.length, 0);

function local(mode: string, maxTokens = 64) {
  return { disaggregation: { protocol: "vllm-mooncake", localPrefill: { mode, maxTokens } } };
}

Deno.test("threshold: a short uncached part is prefilled on the decode instance holding the rest", async () => {
  const t = await startPdCluster("vllm-mooncake", local("threshold"));
  try {
    // Short prompt: fewer tokens than the threshold, prefilled where it decodes.
    const short = await send(t, range(1, 40));
    assertEquals(short.headers.get("x-tidegate-prefill-instance"), null);
    assert(short.headers.get("x-tidegate-instance")?.startsWith("d"));
    assertEquals(requestsOn(t.prefill), 0, "no prefill instance was asked");
    const [entry] = t.router.decisions.recent(1);
    assertEquals(entry.pd?.localPrefill?.reason, "short_suffix");
    assertEquals(entry.pd?.decode, short.headers.get("x-tidegate-instance"));

    // A long prompt d1 holds all but 16 tokens of: d1 is chosen (the prefix breaks the tie) and
    // prefills those itself.
    const prompt = range(900, 13 * CHUNK);
    const scheme = createKeyScheme({
      hash: "sha256_cbor",
      seed: "0",
      chunkSize: CHUNK,
      keyFormat: "llumnix",
    });
    for (const key of scheme.keys(prompt).slice(0, 12)) t.master.put(key, "10.0.2.2:17000");
    const held = await send(t, prompt);
    assertEquals(held.headers.get("x-tidegate-instance"), "d1");
    assertEquals(held.headers.get("x-tidegate-prefill-instance"), null);
    const onD1 = t.decode[1].stats.requests.at(-1)!;
    assertEquals(onD1.body?.kv_transfer_params, undefined, "a plain request");
    assertEquals(onD1.pd?.outcome, "plain");

    // A long prompt nobody holds goes through a prefill instance as before.
    const cold = await send(t, range(5000, 200));
    assert(cold.headers.get("x-tidegate-prefill-instance")?.startsWith("p"));
    assertEquals(t.router.decisions.recent(1)[0].pd?.localPrefill?.reason, "long_suffix");
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    const count = (result: string, reason: string) =>
      Number(
        metrics.split("\n").find((l) =>
          l.startsWith("tidegate_pd_local_prefills_total") &&
          l.includes(`result="${result}"`) && l.includes(`reason="${reason}"`)
        )?.split(" ").at(-1),
      );
    assertEquals([count("local", "short_suffix"), count("remote", "long_suffix")], [2, 1]);
  } finally {
    await t.close();
  }
});

Deno.test("a local prefill is expected on its decode instance until its first token, and leaves no expectation behind", async () => {
  const t = await startPdCluster("vllm-mooncake", local("threshold"));
  try {
    const outlook = t.router.registry.runtime(MODEL)!.decodeOutlook!;
    const expected: { decodeId: string; leasedAsDecode?: boolean }[] = [];
    const expect = outlook.expect.bind(outlook);
    outlook.expect = (decodeId, endsAt, options) => {
      expected.push({ decodeId, leasedAsDecode: options?.leasedAsDecode });
      return expect(decodeId, endsAt, options);
    };
    const response = await send(t, range(1, 40));
    const decodeId = response.headers.get("x-tidegate-instance")!;
    assertEquals(expected, [{ decodeId, leasedAsDecode: false }]);
    assertEquals(outlook.forecast(decodeId, 0).joiningInS, []);
  } finally {
    await t.close();
  }
});

Deno.test("predicted: a busy prefill side sends a long prompt to prefill on its decode instance", async () => {
  const t = await startPdCluster("vllm-mooncake", local("predicted", 0));
  try {
    const prompt = range(7000, 4000);
    const idle = await send(t, prompt);
    assert(idle.headers.get("x-tidegate-prefill-instance")?.startsWith("p"), "idle: remote");
    assertEquals(t.router.decisions.recent(1)[0].pd?.localPrefill?.reason, "remote_faster");
    // Minutes of prefill work queued on both prefill instances (held by the router's account).
    const account = t.router.registry.runtime(MODEL)!.cluster.account;
    const busy = ["p0", "p1"].map((id) => account.lease(id, 400_000));
    try {
      const response = await send(t, range(20_000, 4000));
      assertEquals(response.headers.get("x-tidegate-prefill-instance"), null);
      assert(response.headers.get("x-tidegate-instance")?.startsWith("d"));
      const verdict = t.router.decisions.recent(1)[0].pd?.localPrefill;
      assertEquals(verdict?.reason, "local_faster");
      assert(verdict!.localTtftS! < verdict!.remoteTtftS!);
    } finally {
      for (const lease of busy) lease.release();
    }
  } finally {
    await t.close();
  }
});

Deno.test("localPrefill.chunkTokens reaches the verdict: a chunked local prefill counts a step per chunk", async () => {
  const localTtftS = async (chunkTokens?: number) => {
    const config = local("predicted", 0);
    const t = await startPdCluster("vllm-mooncake", {
      disaggregation: {
        ...config.disaggregation,
        localPrefill: { ...config.disaggregation.localPrefill, chunkTokens },
      },
    });
    const account = t.router.registry.runtime(MODEL)!.cluster.account;
    const busy = ["p0", "p1"].map((id) => account.lease(id, 400_000));
    try {
      await send(t, range(20_000, 4000));
      const verdict = t.router.decisions.recent(1)[0].pd?.localPrefill;
      assertEquals(verdict?.reason, "local_faster");
      return verdict!.localTtftS!;
    } finally {
      for (const lease of busy) lease.release();
      await t.close();
    }
  };
  const whole = await localTtftS();
  const chunked = await localTtftS(512);
  // 4,000 uncached tokens in 512-token chunks: 8 decode steps where the whole prefill waits 1.
  assertAlmostEquals(chunked - whole, 7 * decodeStepS(DEFAULT_DECODE_MODEL, 1), 1e-9);
});

Deno.test("admission judges a local prefill on its own TTFT: a busy prefill side refuses no request its decode instance serves in time", async () => {
  const slo = { slo: { ttftS: 30, admission: true } };
  const withSlo = (mode: string) => ({ ...local(mode, 0), ...slo });
  for (const mode of ["predicted", "off"]) {
    const t = await startPdCluster("vllm-mooncake", withSlo(mode));
    const account = t.router.registry.runtime(MODEL)!.cluster.account;
    // Minutes of prefill work queued on both prefill instances: the remote plan breaks the SLO.
    const busy = ["p0", "p1"].map((id) => account.lease(id, 400_000));
    try {
      const response = await fetch(`${t.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, prompt: range(30_000, 4000), max_tokens: 3 }),
      });
      const text = await response.text();
      if (mode === "off") {
        assertEquals(response.status, 429, text); // no local prefill: the remote plan decides
        continue;
      }
      assertEquals(response.status, 200, text);
      assertEquals(response.headers.get("x-tidegate-prefill-instance"), null);
      const verdict = t.router.decisions.recent(1)[0].pd?.localPrefill;
      assert(verdict!.localTtftS! < 30 && verdict!.remoteTtftS! > 30, JSON.stringify(verdict));
    } finally {
      for (const lease of busy) lease.release();
      await t.close();
    }
  }
});

Deno.test("local prefill is refused in config with the sglang protocol", () => {
  const error = assertThrows(() =>
    resolveConfig({
      models: [{
        name: "m",
        tokenizer: { mode: "none" },
        kv: { store: "none" },
        disaggregation: { protocol: "sglang", localPrefill: { mode: "threshold" } },
        instances: [
          { id: "p", url: "http://127.0.0.1:1", role: "prefill", engine: "sglang" },
          { id: "d", url: "http://127.0.0.1:2", role: "decode", engine: "sglang" },
        ],
      }],
    })
  );
  assert(String(error).includes("bootstrap room"), String(error));
});

Deno.test("with kv.poolLoads the pool's prefix counts for a local prefill; without, only the decode instance's own", async () => {
  const reasonFor = async (poolLoads: boolean) => {
    const t = await startPdCluster("vllm-mooncake", { ...local("threshold"), kv: { poolLoads } });
    try {
      // All but 16 tokens of the prompt are in the pool, on a prefill instance's host: no decode
      // instance holds any of it.
      const prompt = range(700, 13 * CHUNK);
      t.hold(0, prompt, 12);
      const answer = await send(t, prompt);
      const [entry] = t.router.decisions.recent(1);
      return {
        reason: entry.pd?.localPrefill?.reason,
        uncached: entry.pd?.localPrefill?.uncachedTokens,
        prefill: answer.headers.get("x-tidegate-prefill-instance"),
      };
    } finally {
      await t.close();
    }
  };
  assertEquals(await reasonFor(true), { reason: "short_suffix", uncached: 16, prefill: null });
  const own = await reasonFor(false);
  assertEquals([own.reason, own.uncached], ["long_suffix", 13 * CHUNK]);
  assert(own.prefill?.startsWith("p"));
});

Deno.test("a local prefill retried on the next decode instance is leased and expected there, and leaves nothing behind", async () => {
  const t = await startPdCluster("vllm-mooncake", local("threshold"));
  try {
    const runtime = t.router.registry.runtime(MODEL)!;
    const outlook = runtime.decodeOutlook!;
    const expected: { decodeId: string; leasedAsDecode?: boolean }[] = [];
    const expect = outlook.expect.bind(outlook);
    outlook.expect = (decodeId, endsAt, options) => {
      expected.push({ decodeId, leasedAsDecode: options?.leasedAsDecode });
      return expect(decodeId, endsAt, options);
    };
    const leased: { id: string; tokens: number }[] = [];
    const lease = runtime.cluster.account.lease.bind(runtime.cluster.account);
    runtime.cluster.account.lease = (id, tokens, options) => {
      leased.push({ id, tokens });
      return lease(id, tokens, options);
    };
    // d1 holds the prompt's first two chunks, d0 its first: d1 comes first (the prefix breaks the
    // tie) and refuses; d0 then prefills what it lacks.
    const prompt = range(1, 40);
    const scheme = createKeyScheme({
      hash: "sha256_cbor",
      seed: "0",
      chunkSize: CHUNK,
      keyFormat: "llumnix",
    });
    const keys = scheme.keys(prompt);
    for (const key of keys.slice(0, 2)) t.master.put(key, "10.0.2.2:17000");
    t.master.put(keys[0], "10.0.2.1:17000");
    await t.decode[1].setFailure("http503");
    const response = await send(t, prompt);
    assertEquals(response.headers.get("x-tidegate-instance"), "d0");
    assertEquals(expected, [
      { decodeId: "d1", leasedAsDecode: false },
      { decodeId: "d0", leasedAsDecode: false },
    ]);
    assertEquals(leased, [{ id: "d1", tokens: 40 - 2 * CHUNK }, { id: "d0", tokens: 40 - CHUNK }]);
    for (const id of ["d0", "d1"]) assertEquals(outlook.forecast(id, 0).joiningInS, []);
    await eventually(() => t.router.gateway.inFlight === 0, 5_000, "the request ended");
    const nothing = { prefillTokens: 0, prefillRequests: 0, decodeRequests: 0 };
    for (const id of ["d0", "d1"]) assertEquals(runtime.cluster.account.load(id), nothing);
  } finally {
    await t.close();
  }
});

/**
 * Prefill/decode disaggregation end to end over loopback, for each protocol the engines speak
 * (docs/compat.md §7): the router in front of validating P/D fakes (tests/fakes/fake_engine.ts
 * option `pd`), a fake Mooncake master for the prefix lookup.
 */
import { assert, assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { createRouter } from "../../routes/app.ts";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { type FakeEngine, startFakeEngine } from "../../src/fakes/fake_engine.ts";
import type { PdProtocol } from "../../src/fakes/pd_protocol.ts";
import { range } from "../support/harness.ts";
import { CHUNK, MODEL, type PdCluster, startPdCluster } from "../support/pd_cluster.ts";
import { eventually } from "../support/eventually.ts";
import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";
import { BootstrapEngineIds } from "../../src/proxy/mooncake_bootstrap.ts";
import { rankLoadsReader } from "../../src/cluster/rank_loads.ts";
import { decodeLease } from "../../src/gateway/reservation.ts";

const PROTOCOLS: PdProtocol[] = ["vllm-nixl", "vllm-mooncake", "sglang"];

function send(url: string, body: Record<string, unknown>, signal?: AbortSignal) {
  return fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, max_tokens: 4, ...body }),
    signal,
  });
}

/** Every lease of the model back to zero (prefill tokens, prefill and decode requests). */
function leasesOut(t: PdCluster): number {
  const cluster = t.router.registry.runtime(MODEL)!.cluster;
  return [...t.prefill, ...t.decode].reduce((sum, e) => {
    const load = cluster.account.load(e.id);
    return sum + load.prefillTokens + load.prefillRequests + load.decodeRequests;
  }, 0);
}

const served = (e: FakeEngine) => e.stats.requests.filter((r) => r.pd?.outcome === "ok").length;

for (const protocol of PROTOCOLS) {
  Deno.test(`${protocol}: streamed and non-streamed requests go through a prefill and a decode instance, named in the headers`, async () => {
    const t = await startPdCluster(protocol);
    try {
      for (const stream of [false, true]) {
        const response = await send(t.url, { prompt: range(1, 64), stream });
        const text = await response.text();
        assertEquals(response.status, 200, text);
        const prefill = response.headers.get("x-tidegate-prefill-instance");
        const decode = response.headers.get("x-tidegate-decode-instance");
        assert(prefill?.startsWith("p") && decode?.startsWith("d"), `${prefill} / ${decode}`);
        assertEquals(response.headers.get("x-tidegate-instance"), decode);
        if (stream) {
          assert(text.includes("data: [DONE]"), text);
          assert(!text.includes('"usage"'), `the router's usage request stays hidden: ${text}`);
        } else assertEquals(JSON.parse(text).object, "text_completion");
      }
      const onDecode = t.decode.flatMap((e) => e.stats.requests).filter((r) => r.pd);
      assertEquals(onDecode.map((r) => r.pd!.outcome), ["ok", "ok"]);
      const streamed = onDecode.find((r) => r.stream);
      assertEquals(streamed?.body?.stream_options, { include_usage: true });
      await eventually(() => leasesOut(t) === 0, 2_000, "every lease back");
    } finally {
      await t.close();
    }
  });

  Deno.test(`${protocol}: the prefill instance holding the longest prefix and the least loaded decode instance are chosen`, async () => {
    const t = await startPdCluster(protocol);
    try {
      const prompt = range(500, 128);
      t.hold(1, prompt, 6);
      // Two requests decoding on d0 (held by the router's own account): d1 is the less loaded.
      const account = t.router.registry.runtime(MODEL)!.cluster.account;
      const busy = [account.lease("d0", 0), account.lease("d0", 0)];
      for (const lease of busy) lease.firstToken();
      const response = await send(t.url, { prompt });
      await response.text();
      assertEquals(response.status, 200);
      assertEquals(response.headers.get("x-tidegate-prefill-instance"), "p1");
      assertEquals(response.headers.get("x-tidegate-decode-instance"), "d1");
      assertEquals(Number(response.headers.get("x-tidegate-hit-tokens")), 6 * CHUNK);
      for (const lease of busy) lease.release();
    } finally {
      await t.close();
    }
  });

  Deno.test(`${protocol}: a dead prefill instance is retried on the next, a dead decode instance likewise`, async () => {
    const t = await startPdCluster(protocol);
    try {
      const prompt = range(900, 64);
      t.hold(0, prompt, 4);
      await t.prefill[0].setFailure("refuse");
      const first = await send(t.url, { prompt, stream: true });
      const firstText = await first.text();
      assertEquals(first.status, 200, firstText);
      assertEquals(first.headers.get("x-tidegate-prefill-instance"), "p1");
      await t.prefill[0].setFailure("none");

      await t.decode[0].setFailure("refuse");
      await t.decode[1].setFailure("none");
      const account = t.router.registry.runtime(MODEL)!.cluster.account;
      const busy = account.lease("d1", 0);
      busy.firstToken(); // d0 is the first choice now, and it is dead
      const second = await send(t.url, { prompt: range(2000, 64) });
      const secondText = await second.text();
      busy.release();
      assertEquals(second.status, 200, secondText);
      assertEquals(second.headers.get("x-tidegate-decode-instance"), "d1");
      assert(served(t.decode[1]) >= 1);
      await eventually(() => leasesOut(t) === 0, 2_000, "every lease back");
    } finally {
      await t.close();
    }
  });

  Deno.test(`${protocol}: a client that leaves mid-stream ends both legs and every lease`, async () => {
    const t = await startPdCluster(protocol);
    try {
      const abort = new AbortController();
      const response = await send(t.url, {
        prompt: range(3000, 64),
        stream: true,
        max_tokens: 2_000,
      }, abort.signal);
      assertEquals(response.status, 200);
      const reader = response.body!.getReader();
      await reader.read();
      abort.abort();
      await reader.cancel().catch(() => {});
      await eventually(() => leasesOut(t) === 0, 3_000, "every lease back");
      const decode = t.decode.flatMap((e) => e.stats.requests).find((r) => r.pd);
      await eventually(() => decode?.outcome === "client_abort", 3_000, "the decode leg cut");
    } finally {
      await t.close();
    }
  });
}

/** The P/D requests the engines saw, in arrival order. */
const pdRecords = (engines: FakeEngine[]) =>
  engines.flatMap((e) => e.stats.requests.filter((r) => r.pd).map((r) => ({ engine: e, r })))
    .sort((a, b) => a.r.arrivedAtMs - b.r.arrivedAtMs);

Deno.test("vllm-nixl: a prefill answering no kv_transfer_params (its token stopped) is followed by a plain decode", async () => {
  // Older vLLM answers kv_transfer_params only for a FINISHED_LENGTH_CAPPED prefill; the toy
  // proxy then sends the decode the client's body, which it prefills locally.
  const t = await startPdCluster("vllm-nixl", {}, {}, { prefill: { pd: { prefillStops: true } } });
  try {
    for (const stream of [false, true]) {
      const response = await send(t.url, { prompt: range(40, 64), stream });
      const text = await response.text();
      assertEquals(response.status, 200, text);
      assert(response.headers.get("x-tidegate-prefill-instance")?.startsWith("p"));
      if (stream) assert(text.includes("data: [DONE]"), text);
      else assertEquals(JSON.parse(text).choices[0].text.length > 0, true);
    }
    const prefills = pdRecords(t.prefill).map(({ r }) => r);
    assertEquals(prefills.map((r) => r.pd!.answeredKvTransferParams), [null, null]);
    const decodes = pdRecords(t.decode).map(({ r }) => r);
    assertEquals(decodes.map((r) => [r.pd!.outcome, r.outcome]), [["plain", "ok"], [
      "plain",
      "ok",
    ]]);
    assert(decodes.every((r) => !("kv_transfer_params" in r.body!)), "the client's own body");
    assertEquals(decodes.map((r) => r.requestId), prefills.map((r) => r.requestId));
    await eventually(() => leasesOut(t) === 0, 2_000, "every lease back");
  } finally {
    await t.close();
  }
});

/** The engine id the prefill behind `key` ran on (its DP rank's). */
function prefillEngineId(t: PdCluster, key: string | undefined): string | undefined {
  const found = pdRecords(t.prefill).find(({ r }) => r.pd!.key === key);
  const rank = found?.r.pd?.dataParallelRank;
  return rank === undefined ? undefined : found!.engine.pd!.engineIds[rank];
}

Deno.test("vllm-mooncake: each prefill is pinned to a DP rank, spread over the ranks, and its decode names that rank's engine id", async () => {
  const t = await startPdCluster("vllm-mooncake", {}, {}, { prefill: { dataParallelSize: 2 } });
  try {
    for (let i = 0; i < 4; i++) {
      const response = await send(t.url, { prompt: range(300 * i, 64), stream: i % 2 === 1 });
      const text = await response.text();
      assertEquals(response.status, 200, text);
    }
    const prefills = pdRecords(t.prefill).map(({ r }) => r);
    assertEquals(prefills.length, 4, "no prefill was sent again");
    assert(prefills.every((r) => r.headers["x-data-parallel-rank"] !== undefined));
    const ranks = prefills.map((r) => r.pd!.dataParallelRank);
    assertEquals(new Set(ranks), new Set([0, 1]), `ranks used: ${ranks}`);
    const decodes = pdRecords(t.decode).map(({ r }) => r);
    assertEquals(decodes.map((r) => r.pd!.outcome), ["ok", "ok", "ok", "ok"]);
    for (const r of decodes) {
      const params = r.pd!.kvTransferParams as Record<string, unknown>;
      assertEquals(params.remote_engine_id, prefillEngineId(t, r.pd!.key));
    }
    await eventually(() => leasesOut(t) === 0, 2_000, "every lease back");
  } finally {
    await t.close();
  }
});

Deno.test("vllm-mooncake: the prefill goes to the DP rank with the least load its engine reports", async () => {
  // A decode step of 1 ms: the requests that keep rank 0 busy last seconds (the router's own
  // prefills make one token).
  const t = await startPdCluster("vllm-mooncake", {}, {}, {
    prefill: { dataParallelSize: 2, decodeSecondsPerToken: 1, pd: { strict: false } },
  });
  const busy: Response[] = [];
  try {
    // Three long plain requests pinned to rank 0 of each prefill engine (vLLM serves them whole).
    for (const p of t.prefill) {
      for (let i = 0; i < 3; i++) {
        busy.push(
          await fetch(`${p.url}/v1/completions`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-data-parallel-rank": "0" },
            body: JSON.stringify({
              model: MODEL,
              prompt: "busy",
              max_tokens: 10_000,
              stream: true,
            }),
          }),
        );
      }
    }
    await eventually(() => t.prefill.every((p) => p.load().running === 3), 2_000, "rank 0 busy");
    for (let i = 0; i < 2; i++) {
      const response = await send(t.url, { prompt: range(500 + 100 * i, 64) });
      assertEquals(response.status, 200, await response.text());
    }
    const pinned = pdRecords(t.prefill).filter(({ r }) => r.pd!.outcome === "ok");
    assertEquals(pinned.map(({ r }) => r.pd!.dataParallelRank), [1, 1]);
  } finally {
    await Promise.all(busy.map((r) => r.body?.cancel()));
    await t.close();
  }
});

Deno.test("vllm-mooncake: a prefill restarted with new engine ids is asked /query again and the pair retried once", async () => {
  const t = await startPdCluster("vllm-mooncake");
  try {
    const prompt = range(700, 64);
    t.hold(0, prompt, 4); // both requests go to p0, whose /query the router has read
    const first = await send(t.url, { prompt });
    assertEquals(first.status, 200, await first.text());
    assertEquals(first.headers.get("x-tidegate-prefill-instance"), "p0");
    const before = t.prefill[0].pd!.engineIds;
    t.prefill[0].renewEngineIds();
    const second = await send(t.url, { prompt });
    assertEquals(second.status, 200, await second.text());
    assertEquals(second.headers.get("x-tidegate-prefill-instance"), "p0");
    const decodes = pdRecords(t.decode).map(({ r }) => r);
    const engineIds = decodes.map((r) =>
      (r.pd!.kvTransferParams as Record<string, unknown>).remote_engine_id
    );
    assertEquals(decodes.map((r) => r.pd!.outcome), ["ok", "mismatch", "ok"]);
    assertEquals(engineIds, [before[0], before[0], t.prefill[0].pd!.engineIds[0]]);
    assert(before[0] !== t.prefill[0].pd!.engineIds[0]);
    await eventually(() => leasesOut(t) === 0, 2_000, "every lease back");
  } finally {
    await t.close();
  }
});

Deno.test("vllm-mooncake: without a per-rank load report the ranks take turns; /query is asked again when forgotten or old", async () => {
  const asked: string[] = [];
  let query: Record<string, unknown> = { "1": { engine_id: "e1" }, "0": { engine_id: "e0" } };
  let now = 0;
  const fetch = (input: RequestInfo | URL) => {
    const url = String(input);
    asked.push(new URL(url).pathname);
    // An engine whose /metrics has no `engine` label: nothing tells the ranks apart.
    const body = url.endsWith("/query") ? JSON.stringify(query) : "vllm:num_requests_waiting 4\n";
    return Promise.resolve(new Response(body));
  };
  const ids = new BootstrapEngineIds({
    timeoutMs: 1_000,
    now: () => now,
    fetch,
    readLoads: rankLoadsReader(fetch, 1_000),
  });
  const picks = [];
  for (let i = 0; i < 4; i++) picks.push((await ids.pick("http://p0:8000", "::1", 8998))?.rank);
  assertEquals(picks, [0, 1, 0, 1]);
  assertEquals(asked.filter((p) => p === "/query").length, 1, "asked once");
  query = { "0": { engine_id: "e0-new" } };
  ids.forget("::1", 8998);
  assertEquals(await ids.ranks("::1", 8998), [{ rank: 0, engineId: "e0-new" }]);
  // Ten seconds on, the answer in hand serves once more while a new one is asked for.
  query = { "0": { engine_id: "e0-newer" } };
  now += 10_000;
  assertEquals(await ids.ranks("::1", 8998), [{ rank: 0, engineId: "e0-new" }]);
  assertEquals(await ids.ranks("::1", 8998), [{ rank: 0, engineId: "e0-newer" }]);
});

/** Whether this host can listen on IPv6 loopback (CI runners may not). */
function ipv6Loopback(): boolean {
  try {
    Deno.listen({ hostname: "::1", port: 0 }).close();
    return true;
  } catch {
    return false;
  }
}

Deno.test({
  name:
    "sglang: an IPv6 prefill's bootstrap_host goes in brackets, as mini_lb and sgl-router send it",
  ignore: !ipv6Loopback(),
  async fn() {
    const t = await startPdCluster("sglang", {}, {}, { prefill: { hostname: "::1" } });
    try {
      assert(t.prefill[0].url.startsWith("http://[::1]:"), t.prefill[0].url);
      for (const stream of [false, true]) {
        const response = await send(t.url, { prompt: range(60, 64), stream });
        assertEquals(response.status, 200, await response.text());
      }
      const decodes = pdRecords(t.decode).map(({ r }) => r);
      assertEquals(decodes.map((r) => r.pd!.bootstrap?.host), ["[::1]", "[::1]"]);
      assertEquals(decodes.map((r) => r.pd!.outcome), ["ok", "ok"]);
      await eventually(() => leasesOut(t) === 0, 2_000, "every lease back");
    } finally {
      await t.close();
    }
  },
});

Deno.test("P/D hits: a NIXL (vLLM 0.32) or SGLang decode reports its prefill's hits, judged against the prefill instance's prediction; a vLLM Mooncake decode's count is not a hit", async () => {
  for (const protocol of ["vllm-nixl", "sglang", "vllm-mooncake"] as const) {
    const t = await startPdCluster(protocol, {}, {}, { prefill: { cachedTokens: () => 48 } });
    try {
      const prompt = range(1, 64);
      t.hold(1, prompt, 3); // p1 holds 48 tokens: kv_hit_len sends the prefill there
      const response = await send(t.url, { prompt });
      assertEquals(response.status, 200);
      const body = await response.json();
      assertEquals(response.headers.get("x-tidegate-prefill-instance"), "p1");
      assertEquals(response.headers.get("x-tidegate-hit-tokens"), "48");
      const samples = parsePrometheusText(await (await fetch(`${t.url}/metrics`)).text()).samples;
      const total = (name: string) =>
        samples.filter((s) => s.name === name).reduce((sum, s) => sum + s.value, 0);
      const mooncake = protocol === "vllm-mooncake";
      // vLLM Mooncake: everything it did not compute, the transferred prompt.
      assertEquals(body.usage.prompt_tokens_details.cached_tokens, mooncake ? 64 : 48, protocol);
      assertEquals(total("tidegate_engine_cached_tokens_total"), mooncake ? 0 : 48, protocol);
      assertEquals(total("tidegate_hit_mismatch_tokens_total"), 0, protocol);
    } finally {
      await t.close();
    }
  }
});

Deno.test("a streamed concurrent pair stays expected on its decode instance past the decode's headers, until its prefill ends", async () => {
  for (const protocol of ["sglang", "vllm-mooncake"] as const) {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => open = resolve);
    // The prefill engines hold every prefill until the gate opens.
    const t = await startPdCluster(protocol, {}, {}, {
      prefill: { cachedTokens: () => gate.then(() => 0) },
    });
    try {
      const outlook = t.router.registry.runtime(MODEL)!.decodeOutlook!;
      const response = await send(t.url, { prompt: range(1, 64), stream: true });
      assertEquals(response.status, 200, protocol);
      const decodeId = response.headers.get("x-tidegate-decode-instance")!;
      assertEquals(outlook.leasedJoiners(decodeId), 1, `${protocol}: headers came, prefill runs`);
      open();
      await response.text();
      await eventually(() => outlook.leasedJoiners(decodeId) === 0, 5_000, "its arrival");
    } finally {
      open();
      await t.close();
    }
  }
});

Deno.test("a pair whose prefill fails leaves no request expected on its decode instance", async () => {
  for (const protocol of ["sglang", "vllm-mooncake", "vllm-nixl"] as const) {
    const t = await startPdCluster(protocol);
    try {
      await Promise.all(t.prefill.map((e) => e.close()));
      for (let i = 0; i < 3; i++) {
        const response = await send(t.url, { prompt: range(i * 100, 64) });
        await response.body?.cancel();
        assert(response.status >= 500, `${protocol}: ${response.status}`);
      }
      const runtime = t.router.registry.runtime(MODEL)!;
      const joining = ["d0", "d1"].map((id) => runtime.decodeOutlook!.forecast(id, 0).joiningInS);
      assertEquals(joining, [[], []], protocol);
      await eventually(() => leasesOut(t) === 0, 5_000, "leases back to zero");
    } finally {
      await t.close();
    }
  }
});

Deno.test("early rejection answers 429 before any prefill request is sent", async () => {
  const t = await startPdCluster("vllm-nixl", {
    slo: { ttftS: 60, tbtS: 0.05, admission: true },
    disaggregation: { protocol: "vllm-nixl", earlyRejection: "early" },
  });
  try {
    // 30 ms + 0.5 ms per request: 60 decoding requests on each decode instance break 50 ms.
    const account = t.router.registry.runtime(MODEL)!.cluster.account;
    const busy = ["d0", "d1"].flatMap((id) => range(0, 60).map(() => account.lease(id, 0)));
    for (const lease of busy) lease.firstToken();
    const response = await send(t.url, { prompt: range(1, 64) });
    assertEquals(response.status, 429);
    const { error } = await response.json();
    assertEquals(error.code, "tbt_slo");
    assert(response.headers.get("retry-after"));
    assertEquals(t.prefill.reduce((n, e) => n + e.stats.requests.length, 0), 0, "no prefill sent");
    for (const lease of busy) lease.release();
    assertEquals(leasesOut(t), 0);
  } finally {
    await t.close();
  }
});

Deno.test("earlyRejection committed: requests still prefilling for the decode instances count against the TBT SLO, which early does not see", async () => {
  for (const [earlyRejection, status] of [["early", 200], ["committed", 429]] as const) {
    const t = await startPdCluster("vllm-nixl", {
      slo: { ttftS: 60, tbtS: 0.05, admission: true },
      disaggregation: { protocol: "vllm-nixl", earlyRejection },
    });
    try {
      // As 60 admitted requests each whose prefill has not ended: a decode lease and an
      // expected arrival a minute away, on each decode instance (30 ms + 0.5 ms per request).
      const runtime = t.router.registry.runtime(MODEL)!;
      const bound = ["d0", "d1"].flatMap((id) =>
        range(0, 60).map(() => ({
          lease: decodeLease(runtime, id),
          arrived: runtime.decodeOutlook!.expect(id, performance.now() + 60_000),
        }))
      );
      const response = await send(t.url, { prompt: range(1, 64) });
      assertEquals(response.status, status, earlyRejection);
      const body = await response.json();
      if (status === 429) {
        assertEquals(body.error.code, "tbt_slo");
        assertEquals(t.prefill.reduce((n, e) => n + e.stats.requests.length, 0), 0);
      }
      const [decision] = t.router.decisions.recent(1);
      assertEquals(decision.pd?.judgedBatch, earlyRejection === "committed" ? 60 : 0);
      assertEquals(decision.pd?.judgedMode, earlyRejection);
      for (const { lease, arrived } of bound) {
        arrived();
        lease.release();
      }
      await eventually(() => leasesOut(t) === 0, 5_000, "leases back to zero");
    } finally {
      await t.close();
    }
  }
});

Deno.test("decodeLoad: the decode pool's mean is judged, or with `instance` the chosen instance alone", async () => {
  for (const [decodeLoad, status] of [["pool", 429], ["instance", 200]] as const) {
    const t = await startPdCluster("vllm-nixl", {
      slo: { ttftS: 60, tbtS: 0.05, admission: true },
      disaggregation: { protocol: "vllm-nixl", earlyRejection: "early", decodeLoad },
    });
    try {
      // 30 ms + 0.5 ms per request: d0 with 60 and d1 with 21 average 40.5 (over 50 ms), while
      // d1, the least running and so the one chosen, stays within it with this request.
      const account = t.router.registry.runtime(MODEL)!.cluster.account;
      const busy = [...range(0, 60).map(() => "d0"), ...range(0, 21).map(() => "d1")]
        .map((id) => account.lease(id, 0));
      for (const lease of busy) lease.firstToken();
      const response = await send(t.url, { prompt: range(1, 64) });
      assertEquals(response.status, status, decodeLoad);
      const body = await response.json();
      if (status === 429) assertEquals(body.error.code, "tbt_slo");
      else assertEquals(response.headers.get("x-tidegate-decode-instance"), "d1");
      const [decision] = t.router.decisions.recent(1);
      assertEquals(
        [decision.pd?.judgedLoad, decision.pd?.judgedBatch],
        [decodeLoad, decodeLoad === "pool" ? 40.5 : 21],
      );
      for (const lease of busy) lease.release();
      await eventually(() => leasesOut(t) === 0, 5_000, "leases back to zero");
    } finally {
      await t.close();
    }
  }
});

Deno.test("each leg is counted by role in /metrics and every decision names its pair and both sides' terms", async () => {
  const t = await startPdCluster("sglang");
  try {
    const response = await send(t.url, { prompt: range(1, 64), stream: true });
    await response.text();
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    const legs = parsePrometheusText(metrics).samples
      .filter((s) => s.name === "tidegate_pd_legs_total" && s.value > 0)
      .map((s) => [s.labels.role, s.labels.instance, s.labels.result, s.value]);
    assertEquals(legs.sort(), [
      ["decode", response.headers.get("x-tidegate-decode-instance"), "ok", 1],
      ["prefill", response.headers.get("x-tidegate-prefill-instance"), "ok", 1],
    ]);
    const [decision] = t.router.decisions.recent(1);
    assertEquals(decision.pd?.protocol, "sglang");
    assertEquals(decision.pd?.prefill, response.headers.get("x-tidegate-prefill-instance"));
    assertEquals(decision.pd?.decode, response.headers.get("x-tidegate-decode-instance"));
    assertEquals(decision.pd?.decodeCandidates.map((c) => c.id).sort(), ["d0", "d1"]);
    assert(decision.pd!.decodeCandidates.every((c) => c.terms.predictedTbtS > 0));
    assertEquals(decision.candidates.map((c) => c.id).sort(), ["p0", "p1"], "the prefill side");
  } finally {
    await t.close();
  }
});

Deno.test("the admin API refuses a prefill instance for a model that serves whole requests", async () => {
  const engine = startFakeEngine({ id: "e0", model: "whole", timeScale: 0.001 });
  const router = await createRouter(
    resolveConfig({
      models: [{
        name: "whole",
        tokenizer: { mode: "none" },
        kv: { store: "none" },
        instances: [{ id: "e0", url: engine.url }],
      }],
    }),
    { background: false, log: () => {} },
  );
  try {
    const response = await router.fetch(
      new Request("http://router/admin/instances", {
        method: "POST",
        body: JSON.stringify({
          model: "whole",
          instance: { id: "p9", url: "http://127.0.0.1:9", role: "prefill" },
        }),
      }),
    );
    assertEquals(response.status, 400);
    const { error } = await response.json();
    assertEquals(error.param, "instance.role");
    assertEquals(router.registry.runtime("whole")!.cluster.get("p9"), undefined);
  } finally {
    await router.close();
    await engine.close();
  }
});

Deno.test("one span per leg, under the request's span, and the decode side's candidates as events", async () => {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const t = await startPdCluster("vllm-nixl", {}, { tracerProvider });
  try {
    const response = await send(t.url, { prompt: range(1, 64) });
    await response.json();
    const spans = exporter.getFinishedSpans();
    const root = spans.find((s) => s.name === "POST /v1/completions")!;
    const prefill = response.headers.get("x-tidegate-prefill-instance");
    const decode = response.headers.get("x-tidegate-decode-instance");
    for (const [name, leg] of [[`prefill ${prefill}`, "prefill"], [`decode ${decode}`, "decode"]]) {
      const span = spans.find((s) => s.name === name);
      assert(span, `${name} in ${spans.map((s) => s.name).join(", ")}`);
      assertEquals(span.attributes["tidegate.leg"], leg);
      assertEquals(span.parentSpanContext?.spanId, root.spanContext().spanId);
    }
    const schedule = spans.find((s) => s.name === "schedule")!;
    assertEquals(schedule.attributes["tidegate.pd.decode"], decode);
    assertEquals(schedule.events.filter((e) => e.name === "decode candidate").length, 2);
  } finally {
    await t.close();
  }
});

Deno.test("/readyz needs a healthy prefill and decode pair for a disaggregated model", async () => {
  const t = await startPdCluster("vllm-nixl", {
    health: { failuresToOpen: 1, intervalMs: 60_000 },
  });
  try {
    const ready = async () => {
      const response = await fetch(`${t.url}/readyz`);
      const body = await response.json();
      return [response.status, body.models[0].ready];
    };
    assertEquals(await ready(), [200, true]);
    const cluster = t.router.registry.runtime(MODEL)!.cluster;
    for (const id of ["d0", "d1"]) cluster.get(id)!.breaker.recordFailure("probe", "connect");
    assertEquals(await ready(), [503, false], "prefill instances alone cannot serve");
  } finally {
    await t.close();
  }
});

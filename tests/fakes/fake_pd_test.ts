/**
 * The P/D fakes accept exactly the sequences docs/compat.md §7 describes and refuse the rest:
 * vLLM NIXL (prefill, then decode with the prefill's kv_transfer_params), vLLM Mooncake and SGLang
 * (prefill and decode at once, meeting by transfer id / bootstrap room).
 */
import assert from "node:assert/strict";
import {
  type FakeEngine,
  type FakeEngineOptions,
  type OpenAiBody,
  startFakeEngine,
} from "../../src/fakes/fake_engine.ts";
import { PdRegistry } from "../../src/fakes/pd_registry.ts";
import { parseBody } from "../../src/fakes/pd_protocol.ts";
import { startDemoCluster } from "../../src/fakes/demo_cluster.ts";
import { eventually } from "../support/eventually.ts";

interface Sse {
  events: Record<string, unknown>[];
  done: boolean;
}

async function readSse(response: Response): Promise<Sse> {
  const text = await response.text();
  const out: Sse = { events: [], done: false };
  for (const chunk of text.split("\n\n")) {
    if (!chunk) continue;
    assert.ok(chunk.startsWith("data: "), chunk);
    const data = chunk.slice(6);
    if (data === "[DONE]") out.done = true;
    else out.events.push(JSON.parse(data));
  }
  return out;
}

function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const completions = (engine: FakeEngine) => `${engine.url}/v1/completions`;
const chat = (engine: FakeEngine) => `${engine.url}/v1/chat/completions`;

/** What the vLLM proxies send a prefill (toy_proxy_server.py / mooncake_connector_proxy.py). */
function vllmPrefillBody(body: OpenAiBody, kvTransferParams: Record<string, unknown>): OpenAiBody {
  const out: OpenAiBody = { ...body, kv_transfer_params: kvTransferParams };
  out.stream = false;
  out.max_tokens = 1;
  if ("max_completion_tokens" in out) out.max_completion_tokens = 1;
  delete out.stream_options;
  return out;
}

const NIXL_PREFILL_PARAMS = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

/** A prefill and a decode fake of one protocol meeting in a registry of their own. */
function pair(
  protocol: "vllm-nixl" | "vllm-mooncake" | "sglang",
  options: {
    timeoutMs?: number;
    strict?: boolean;
    prefill?: FakeEngineOptions;
    decode?: FakeEngineOptions;
  } = {},
) {
  const registry = new PdRegistry();
  const common = { registry, timeoutMs: options.timeoutMs ?? 2000, strict: options.strict };
  const prefill = startFakeEngine({
    id: "p1",
    countTokens: () => 1000,
    ...options.prefill,
    pd: { ...options.prefill?.pd, protocol, role: "prefill", ...common },
  });
  const decode = startFakeEngine({
    id: "d1",
    countTokens: () => 1000,
    ...options.decode,
    pd: { ...options.decode?.pd, protocol, role: "decode", ...common },
  });
  return {
    registry,
    prefill,
    decode,
    async close() {
      await Promise.all([prefill.close(), decode.close()]);
    },
  };
}

// ---- vLLM NIXL ------------------------------------------------------------------------------

Deno.test("NIXL: prefill answers kv_transfer_params, the decode with them streams the answer", async () => {
  const { prefill, decode, registry, close } = pair("vllm-nixl");
  try {
    const body = {
      model: "fake-model",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    };
    const p = await post(chat(prefill), vllmPrefillBody(body, NIXL_PREFILL_PARAMS), {
      "X-Request-Id": "req-1",
    });
    assert.equal(p.status, 200);
    const answer = await p.json();
    assert.equal(answer.choices[0].message.content, " The", "the prefill produces one token");
    assert.equal(answer.usage.completion_tokens, 1);
    const params = answer.kv_transfer_params;
    assert.equal(params.do_remote_prefill, true);
    assert.equal(params.do_remote_decode, false);
    assert.equal(params.remote_engine_id, prefill.pd!.engineIds[0]);
    assert.match(params.remote_request_id, /^chatcmpl-req-1-[0-9a-f]{8}$/);
    assert.equal(params.remote_host, "127.0.0.1");
    assert.equal(params.remote_port, 5600);
    assert.equal(params.tp_size, 1);
    assert.equal(params.remote_num_tokens, 1000);
    assert.equal(params.remote_prefill_cached_tokens, 0, "vLLM 0.32: the prefill's own hits");
    assert.equal(params.remote_block_ids.length, 1, "one block list per KV-cache group");
    assert.equal(params.remote_block_ids[0].length, Math.ceil(1000 / 16));
    assert.equal(registry.slots().length, 1);

    const d = await post(chat(decode), { ...body, kv_transfer_params: params }, {
      "X-Request-Id": "req-1",
    });
    assert.equal(d.status, 200);
    assert.equal(d.headers.get("x-request-id"), "req-1");
    const sse = await readSse(d);
    assert.ok(sse.done);
    const usage = sse.events.at(-1)!.usage as Record<string, unknown>;
    assert.equal(usage.completion_tokens, 4);
    // vLLM 0.32 reports the prefill's hits (none here), not the transfer's whole prompt.
    assert.deepEqual(usage.prompt_tokens_details, { cached_tokens: 0 });
    assert.equal(registry.slots().length, 0, "the decode consumed the prefill's KV");

    const [pr] = prefill.stats.requests;
    assert.equal(pr.pd?.role, "prefill");
    assert.equal(pr.pd?.protocol, "vllm-nixl");
    assert.equal(pr.pd?.requestId, "req-1");
    assert.deepEqual(pr.pd?.kvTransferParams, NIXL_PREFILL_PARAMS);
    assert.deepEqual(pr.pd?.answeredKvTransferParams, params);
    assert.equal(pr.pd?.outcome, "ok");
    const [dr] = decode.stats.requests;
    assert.deepEqual(dr.pd?.kvTransferParams, params);
    assert.deepEqual(dr.pd?.matched, { instanceId: "p1", seq: pr.seq, requestId: "req-1" });
    assert.equal(dr.pd?.transferredTokens, 1000);
    assert.equal(dr.pd?.outcome, "ok");
    assert.equal(dr.outcome, "ok");
    assert.equal(decode.stats.prefixCacheQueries, 0, "the decode prefills nothing");
    assert.equal(prefill.stats.pdByOutcome.ok, 1);
    assert.equal(decode.stats.pdByOutcome.ok, 1);
  } finally {
    await close();
  }
});

Deno.test("NIXL: the prefill honours its KV cache; the decode pays a transfer, not a prefill", async () => {
  const { prefill, decode, close } = pair("vllm-nixl", {
    prefill: {
      countTokens: () => 64_000,
      timeScale: 0.01,
      cachedTokens: (body) => (body.prompt === "warm" ? 60_000 : 0),
    },
    decode: { countTokens: () => 64_000, timeScale: 0.01 },
  });
  try {
    const run = async (prompt: string) => {
      const p = await post(
        completions(prefill),
        vllmPrefillBody({ prompt }, NIXL_PREFILL_PARAMS),
      );
      const { kv_transfer_params } = await p.json();
      const d = await post(completions(decode), {
        prompt,
        max_tokens: 2,
        kv_transfer_params,
      });
      assert.equal(d.status, 200);
      await d.json();
    };
    await run("cold");
    await run("warm");
    const span = (r: { prefillStartedAtMs?: number; prefillEndedAtMs?: number }) =>
      r.prefillEndedAtMs! - r.prefillStartedAtMs!;
    const [cold, warm] = prefill.stats.requests;
    assert.equal(cold.cachedTokens, 0);
    assert.equal(warm.cachedTokens, 60_000);
    assert.ok(span(cold) > 3 * span(warm), `cold ${span(cold)} ms vs warm ${span(warm)} ms`);
    for (const d of decode.stats.requests) {
      // 64k tokens at 327,680 B / 85 GB/s: ~0.25 engine s, ~2.5 ms wall at timeScale 0.01.
      assert.ok(span(d) < span(cold) / 5, `decode took ${span(d)} ms, cold prefill ${span(cold)}`);
      assert.equal(d.pd?.transferredTokens, 64_000);
    }
    assert.equal(decode.stats.prefixCacheQueries, 0);
  } finally {
    await close();
  }
});

Deno.test("NIXL: a decode without a matching prefill fails as vLLM's failed KV load does", async () => {
  const { prefill, decode, close } = pair("vllm-nixl");
  try {
    const forged = {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_block_ids: [[1, 2, 3]],
      remote_engine_id: prefill.pd!.engineIds[0],
      remote_request_id: "cmpl-nobody-0-00000000",
      remote_host: "127.0.0.1",
      remote_port: 5600,
      tp_size: 1,
    };
    const whole = await post(completions(decode), { prompt: "x", kv_transfer_params: forged });
    assert.equal(whole.status, 500);
    assert.deepEqual((await whole.json()).error, {
      message: "Internal server error",
      type: "InternalServerError",
      param: null,
      code: 500,
    });
    // Streamed: the headers are out before the KV load fails; an error event, then [DONE].
    const streamed = await post(completions(decode), {
      prompt: "x",
      stream: true,
      kv_transfer_params: forged,
    });
    assert.equal(streamed.status, 200);
    const sse = await readSse(streamed);
    assert.ok(sse.done);
    assert.equal((sse.events[0].error as Record<string, unknown>).code, 500);
    assert.equal(decode.stats.byOutcome.kv_transfer_failed, 2);
    assert.equal(decode.stats.pdByOutcome.no_prefill, 2);
    assert.match(decode.stats.requests[0].pd!.error!, /no prefill holds/);

    // A real prefill's params work once; replayed they find nothing (the blocks were read).
    const p = await post(
      completions(prefill),
      vllmPrefillBody({ prompt: "x" }, NIXL_PREFILL_PARAMS),
    );
    const { kv_transfer_params } = await p.json();
    const tampered = {
      ...kv_transfer_params,
      remote_block_ids: [[...kv_transfer_params.remote_block_ids[0], 999]],
    };
    const bad = await post(completions(decode), { prompt: "x", kv_transfer_params: tampered });
    assert.equal(bad.status, 500);
    await bad.body?.cancel();
    assert.equal(decode.stats.requests.at(-1)!.pd?.outcome, "mismatch");
    const first = await post(completions(decode), { prompt: "x", kv_transfer_params });
    assert.equal(first.status, 200);
    await first.body?.cancel();
    const again = await post(completions(decode), { prompt: "x", kv_transfer_params });
    assert.equal(again.status, 500);
    await again.body?.cancel();
    assert.equal(decode.stats.requests.at(-1)!.pd?.outcome, "no_prefill");
  } finally {
    await close();
  }
});

Deno.test("NIXL: wrong fields and prefill bodies are refused with 400 naming the field", async () => {
  const { prefill, decode, close } = pair("vllm-nixl");
  try {
    const cases: [FakeEngine, OpenAiBody, string][] = [
      [prefill, { prompt: "x", kv_transfer_params: "yes" }, "kv_transfer_params"],
      [prefill, { prompt: "x", max_tokens: 1 }, "kv_transfer_params"],
      [
        prefill,
        { ...vllmPrefillBody({ prompt: "x" }, NIXL_PREFILL_PARAMS), max_tokens: 5 },
        "max_tokens",
      ],
      [
        prefill,
        {
          ...vllmPrefillBody({ prompt: "x", max_completion_tokens: 9 }, NIXL_PREFILL_PARAMS),
          max_completion_tokens: 9,
        },
        "max_completion_tokens",
      ],
      [
        prefill,
        { ...vllmPrefillBody({ prompt: "x" }, NIXL_PREFILL_PARAMS), stream: true },
        "stream",
      ],
      [
        prefill,
        {
          ...vllmPrefillBody({ prompt: "x" }, NIXL_PREFILL_PARAMS),
          stream_options: { include_usage: true },
        },
        "stream_options",
      ],
      [
        prefill,
        vllmPrefillBody({ prompt: "x" }, { ...NIXL_PREFILL_PARAMS, do_remote_decode: "true" }),
        "kv_transfer_params.do_remote_decode",
      ],
      [
        prefill,
        { ...vllmPrefillBody({ prompt: "x" }, NIXL_PREFILL_PARAMS), min_tokens: 4 },
        "min_tokens",
      ],
      [
        decode,
        {
          prompt: "x",
          kv_transfer_params: {
            do_remote_prefill: true,
            remote_block_ids: [[1]],
            remote_engine_id: "e",
            remote_request_id: "r",
            remote_host: "127.0.0.1",
            remote_port: "5600",
            tp_size: 1,
          },
        },
        "kv_transfer_params.remote_port",
      ],
      [
        decode,
        { prompt: "x", kv_transfer_params: { do_remote_prefill: true, remote_engine_id: "e" } },
        "kv_transfer_params.remote_request_id",
      ],
      [decode, { prompt: "x", kv_transfer_params: [1] }, "kv_transfer_params"],
    ];
    for (const [engine, body, param] of cases) {
      const response = await post(completions(engine), body);
      const error = (await response.json()).error;
      assert.equal(response.status, 400, `${JSON.stringify(body)}: ${error?.message}`);
      assert.equal(error.param, param, error.message);
    }
    assert.equal(prefill.stats.pdByOutcome.invalid, 8);
    assert.equal(decode.stats.pdByOutcome.invalid, 3);
    assert.equal(prefill.stats.requests[0].pd?.outcome, "invalid");
    assert.equal(prefill.stats.requests[0].pd?.kvTransferParams, "yes");
  } finally {
    await close();
  }
});

Deno.test("NIXL: non-strict fakes serve what vLLM silently degrades, and record it", async () => {
  const { decode, close } = pair("vllm-nixl", { strict: false });
  try {
    const response = await post(completions(decode), {
      prompt: "x",
      max_tokens: 2,
      kv_transfer_params: { do_remote_prefill: true, remote_engine_id: "e" },
    });
    assert.equal(response.status, 200);
    const answer = await response.json();
    assert.equal(answer.kv_transfer_params, null);
    const [record] = decode.stats.requests;
    assert.equal(record.pd?.outcome, "degraded");
    assert.match(record.pd!.error!, /Got invalid KVTransferParams" and prefills locally/);
    assert.equal(decode.stats.prefixCacheQueries, 1000, "it prefilled the prompt itself");
  } finally {
    await close();
  }
});

Deno.test("NIXL: a prefill whose token stops answers no kv_transfer_params; a plain decode prefills itself", async () => {
  // Both modes: the toy proxy sends such a decode on purpose.
  for (const strict of [true, false]) {
    const { prefill, decode, registry, close } = pair("vllm-nixl", {
      strict,
      prefill: { pd: { protocol: "vllm-nixl", role: "prefill", prefillStops: true } },
    });
    try {
      const p = await post(
        completions(prefill),
        vllmPrefillBody({ prompt: "x" }, NIXL_PREFILL_PARAMS),
      );
      const answer = await p.json();
      assert.equal(p.status, 200);
      assert.equal(answer.kv_transfer_params, null);
      assert.equal(answer.choices[0].finish_reason, "stop");
      assert.equal(registry.slots().length, 0, "no KV held for a decode");
      assert.equal(prefill.stats.requests[0].pd?.answeredKvTransferParams, null);
      const d = await post(completions(decode), { prompt: "x", max_tokens: 3 });
      assert.equal(d.status, 200);
      assert.equal((await d.json()).usage.completion_tokens, 3);
      const [record] = decode.stats.requests;
      assert.equal(record.pd?.outcome, "plain");
      assert.equal(decode.stats.prefixCacheQueries, 1000, "it prefilled the prompt itself");
    } finally {
      await close();
    }
  }
});

Deno.test("NIXL: a prefill that dies after answering fails its decode; its lease lapses", async () => {
  const { registry, prefill, decode, close } = pair("vllm-nixl", { timeoutMs: 60 });
  try {
    const answer = async () =>
      (await (await post(
        completions(prefill),
        vllmPrefillBody({ prompt: "x" }, NIXL_PREFILL_PARAMS),
      ))
        .json()).kv_transfer_params;
    const held = await answer();
    await prefill.setFailure("refuse");
    const dead = await post(completions(decode), { prompt: "x", kv_transfer_params: held });
    assert.equal(dead.status, 500);
    await dead.body?.cancel();
    assert.equal(decode.stats.requests.at(-1)!.pd?.outcome, "prefill_dead");
    await prefill.setFailure("none");
    const late = await answer();
    const published = prefill.stats.requests.at(-1)!.seq;
    await eventually(
      () => registry.slots().some((s) => s.prefill?.seq === published && s.expired),
      2_000,
      "the late prefill's 60 ms lease to lapse",
    );
    const lapsed = await post(completions(decode), { prompt: "x", kv_transfer_params: late });
    assert.equal(lapsed.status, 500);
    await lapsed.body?.cancel();
    assert.equal(decode.stats.requests.at(-1)!.pd?.outcome, "no_prefill");
    assert.match(decode.stats.requests.at(-1)!.pd!.error!, /lease/);
  } finally {
    await close();
  }
});

Deno.test("P/D fakes keep the usual failure injection", async () => {
  const { prefill, decode, close } = pair("vllm-nixl");
  try {
    await prefill.setFailure("http500");
    const p = await post(
      completions(prefill),
      vllmPrefillBody({ prompt: "x" }, NIXL_PREFILL_PARAMS),
    );
    assert.equal(p.status, 500);
    await p.body?.cancel();
    assert.equal(prefill.stats.byOutcome.http500, 1);
    assert.equal(prefill.stats.requests[0].pd?.outcome, undefined, "P/D handling never ran");
    assert.equal(prefill.stats.requests[0].pd?.role, "prefill");
    await prefill.setFailure("none");
    await decode.setFailure("refuse");
    await assert.rejects(post(completions(decode), { prompt: "x" }));
    await decode.setFailure("none");
    const ok = await post(
      completions(prefill),
      vllmPrefillBody({ prompt: "x" }, NIXL_PREFILL_PARAMS),
    );
    const { kv_transfer_params } = await ok.json();
    await decode.setFailure("midstream");
    const cut = await post(completions(decode), { prompt: "x", stream: true, kv_transfer_params });
    await assert.rejects(cut.text());
    assert.equal(decode.stats.byOutcome.midstream, 1);
  } finally {
    await close();
  }
});

// ---- vLLM Mooncake --------------------------------------------------------------------------

function mooncakeDecodeParams(prefill: FakeEngine, transferId: string, rank = 0) {
  return {
    do_remote_decode: false,
    do_remote_prefill: true,
    remote_bootstrap_addr: prefill.pd!.bootstrapAddr!,
    remote_engine_id: prefill.pd!.engineIds[rank],
    transfer_id: transferId,
  };
}

Deno.test("Mooncake: the bootstrap server's /query names the engine id per DP rank", async () => {
  const { prefill, close } = pair("vllm-mooncake", { prefill: { dataParallelSize: 2 } });
  try {
    const info = prefill.pd!;
    assert.equal(info.bootstrapAddr, `http://127.0.0.1:${info.bootstrapPort}`);
    const query = await (await fetch(`${info.bootstrapAddr}/query`)).json();
    assert.deepEqual(Object.keys(query), ["0", "1"]);
    assert.equal(query["0"].engine_id, info.engineIds[0]);
    assert.equal(query["1"].engine_id, info.engineIds[1]);
    assert.match(query["0"].worker_addr["0"]["0"], /^tcp:\/\/127\.0\.0\.1:\d+$/);
  } finally {
    await close();
  }
});

Deno.test("Mooncake: prefill and decode sent at once meet by transfer_id", async () => {
  // The prefill of the 1000-token prompt takes ~58 ms (timeScale 0.5), all of it waited for by
  // the decode.
  const { prefill, decode, close } = pair("vllm-mooncake", {
    prefill: { dataParallelSize: 2, timeScale: 0.5 },
  });
  try {
    const body = { prompt: "hello", max_tokens: 3, stream: true };
    const transferId = "xfer-req-7";
    // The decode goes first and waits for the prefill, as it waits on the Mooncake sender.
    const d = post(completions(decode), {
      ...body,
      kv_transfer_params: mooncakeDecodeParams(prefill, transferId, 1),
    }, { "X-Request-Id": "req-7" });
    await eventually(() => decode.load().waiting === 1, 2_000, "the decode waiting");
    const p = await post(
      completions(prefill),
      vllmPrefillBody(body, {
        do_remote_decode: true,
        do_remote_prefill: false,
        transfer_id: transferId,
      }),
      { "X-Request-Id": "req-7", "X-data-parallel-rank": "1" },
    );
    assert.equal(p.status, 200);
    assert.equal((await p.json()).kv_transfer_params, null);
    const sse = await readSse(await d);
    assert.ok(sse.done);
    assert.equal(sse.events.filter((e) => (e.choices as unknown[]).length > 0).length, 4);
    const [pr] = prefill.stats.requests;
    const [dr] = decode.stats.requests;
    assert.equal(pr.pd?.dataParallelRank, 1);
    assert.equal(pr.pd?.answeredKvTransferParams, null);
    assert.equal(pr.pd?.key, dr.pd?.key);
    assert.deepEqual(dr.pd?.matched, { instanceId: "p1", seq: 0, requestId: "req-7" });
    assert.ok(dr.pd!.waitedMs! >= 20, `waited ${dr.pd!.waitedMs} ms`);
    assert.equal(dr.pd?.outcome, "ok");
  } finally {
    await close();
  }
});

Deno.test("Mooncake: a decode whose prefill never comes fails after the timeout", async () => {
  const { prefill, decode, close } = pair("vllm-mooncake", { timeoutMs: 80 });
  try {
    const started = performance.now();
    const d = await post(completions(decode), {
      prompt: "x",
      kv_transfer_params: mooncakeDecodeParams(prefill, "xfer-none"),
    });
    assert.equal(d.status, 500);
    await d.body?.cancel();
    assert.ok(performance.now() - started >= 75);
    assert.equal(decode.stats.requests[0].pd?.outcome, "timeout");
    assert.equal(decode.load().waiting, 0);

    // An address nobody serves, or an engine id the bootstrap server does not list: at once.
    const unknown = await post(completions(decode), {
      prompt: "x",
      kv_transfer_params: {
        ...mooncakeDecodeParams(prefill, "t"),
        remote_bootstrap_addr: "http://127.0.0.1:1",
      },
    });
    assert.equal(unknown.status, 500);
    await unknown.body?.cancel();
    assert.equal(decode.stats.requests.at(-1)!.pd?.outcome, "unknown_bootstrap");
    const wrongEngine = await post(completions(decode), {
      prompt: "x",
      kv_transfer_params: { ...mooncakeDecodeParams(prefill, "t"), remote_engine_id: "other" },
    });
    assert.equal(wrongEngine.status, 500);
    await wrongEngine.body?.cancel();
    assert.equal(decode.stats.requests.at(-1)!.pd?.outcome, "mismatch");
  } finally {
    await close();
  }
});

Deno.test("Mooncake: a decode naming another DP rank's engine than the prefill ran on fails", async () => {
  const { prefill, decode, close } = pair("vllm-mooncake", { prefill: { dataParallelSize: 2 } });
  try {
    const body = { prompt: "x", max_tokens: 2 };
    const d = post(completions(decode), {
      ...body,
      kv_transfer_params: mooncakeDecodeParams(prefill, "xfer-r", 0),
    });
    await eventually(() => decode.load().waiting === 1, 2_000, "the decode waiting");
    const p = await post(
      completions(prefill),
      vllmPrefillBody(body, { do_remote_decode: true, transfer_id: "xfer-r" }),
      { "X-data-parallel-rank": "1" },
    );
    assert.equal(p.status, 200);
    await p.body?.cancel();
    const failed = await d;
    assert.equal(failed.status, 500);
    await failed.body?.cancel();
    const [record] = decode.stats.requests;
    assert.equal(record.pd?.outcome, "mismatch");
    assert.match(record.pd!.error!, /ran on DP rank 1 .* \(rank 0\)/);
  } finally {
    await close();
  }
});

Deno.test("Mooncake: renewed engine ids (a restart) are what /query answers; the old ones fail", async () => {
  const { prefill, decode, close } = pair("vllm-mooncake");
  try {
    const old = prefill.pd!.engineIds[0];
    prefill.renewEngineIds();
    const fresh = prefill.pd!.engineIds[0];
    assert.notEqual(fresh, old);
    const query = await (await fetch(`${prefill.pd!.bootstrapAddr}/query`)).json();
    assert.equal(query["0"].engine_id, fresh);
    const stale = await post(completions(decode), {
      prompt: "x",
      kv_transfer_params: { ...mooncakeDecodeParams(prefill, "t"), remote_engine_id: old },
    });
    assert.equal(stale.status, 500);
    await stale.body?.cancel();
    assert.match(decode.stats.requests[0].pd!.error!, /Failed to find remote engine_id/);
  } finally {
    await close();
  }
});

Deno.test("Mooncake: prompts that differ between prefill and decode do not pair", async () => {
  const { prefill, decode, close } = pair("vllm-mooncake", {
    decode: { countTokens: (body) => String(body.prompt).length },
    prefill: { countTokens: (body) => String(body.prompt).length },
  });
  try {
    const p = await post(
      completions(prefill),
      vllmPrefillBody({ prompt: "abc" }, { do_remote_decode: true, transfer_id: "t1" }),
    );
    assert.equal(p.status, 200);
    await p.body?.cancel();
    const d = await post(completions(decode), {
      prompt: "abcdef",
      kv_transfer_params: mooncakeDecodeParams(prefill, "t1"),
    });
    assert.equal(d.status, 500);
    await d.body?.cancel();
    assert.equal(decode.stats.requests[0].pd?.outcome, "mismatch");
    assert.match(decode.stats.requests[0].pd!.error!, /3 prompt tokens.*6/);
  } finally {
    await close();
  }
});

Deno.test("Mooncake: missing transfer_id, older fields and a bad DP rank header are 400", async () => {
  const { prefill, decode, close } = pair("vllm-mooncake");
  try {
    const cases: [FakeEngine, OpenAiBody, Record<string, string>, string][] = [
      [
        prefill,
        vllmPrefillBody({ prompt: "x" }, { do_remote_decode: true }),
        {},
        "kv_transfer_params.transfer_id",
      ],
      [
        prefill,
        vllmPrefillBody({ prompt: "x" }, { do_remote_decode: true, transfer_id: "t" }),
        { "X-data-parallel-rank": "3" },
        "X-data-parallel-rank",
      ],
      [
        decode,
        {
          prompt: "x",
          kv_transfer_params: {
            do_remote_prefill: true,
            bootstrap_server_host: "127.0.0.1",
            bootstrap_server_port: prefill.pd!.bootstrapPort,
          },
        },
        {},
        "kv_transfer_params.remote_bootstrap_addr",
      ],
      [
        decode,
        {
          prompt: "x",
          kv_transfer_params: { ...mooncakeDecodeParams(prefill, "t"), transfer_id: 7 },
        },
        {},
        "kv_transfer_params.transfer_id",
      ],
      [
        decode,
        {
          prompt: "x",
          kv_transfer_params: {
            ...mooncakeDecodeParams(prefill, "t"),
            remote_bootstrap_addr: "127.0.0.1:8998",
          },
        },
        {},
        "kv_transfer_params.remote_bootstrap_addr",
      ],
    ];
    for (const [engine, body, headers, param] of cases) {
      const response = await post(completions(engine), body, headers);
      const error = (await response.json()).error;
      assert.equal(response.status, 400, error?.message);
      assert.equal(error.param, param, error.message);
    }
  } finally {
    await close();
  }
});

Deno.test("Mooncake: a prefill that stops answering takes its bootstrap server down", async () => {
  const { prefill, decode, close } = pair("vllm-mooncake", { timeoutMs: 60 });
  try {
    await prefill.setFailure("http500");
    const p = await post(
      completions(prefill),
      vllmPrefillBody({ prompt: "x" }, { do_remote_decode: true, transfer_id: "t" }),
    );
    assert.equal(p.status, 500);
    await p.body?.cancel();
    const d = await post(completions(decode), {
      prompt: "x",
      kv_transfer_params: mooncakeDecodeParams(prefill, "t"),
    });
    assert.equal(d.status, 500);
    await d.body?.cancel();
    assert.equal(decode.stats.requests[0].pd?.outcome, "timeout");
    await prefill.setFailure("refuse");
    await assert.rejects(fetch(`${prefill.pd!.bootstrapAddr}/query`));
    const gone = await post(completions(decode), {
      prompt: "x",
      kv_transfer_params: mooncakeDecodeParams(prefill, "t2"),
    });
    assert.equal(gone.status, 500);
    await gone.body?.cancel();
    assert.equal(decode.stats.requests.at(-1)!.pd?.outcome, "unknown_bootstrap");
    await prefill.setFailure("none");
    const back = await fetch(`${prefill.pd!.bootstrapAddr}/query`);
    assert.equal(back.status, 200);
    await back.body?.cancel();
  } finally {
    await close();
  }
});

// ---- SGLang ---------------------------------------------------------------------------------

/** What mini_lb sends both halves: the body plus the prefill's bootstrap host, port and room. */
function sglangBody(prefill: FakeEngine, room: string, extra: OpenAiBody = {}): string {
  const body = JSON.stringify({
    model: "fake-model",
    messages: [{ role: "user", content: "hi" }],
    max_tokens: 3,
    bootstrap_host: "127.0.0.1",
    bootstrap_port: prefill.pd!.bootstrapPort,
    bootstrap_room: 0,
    ...extra,
  });
  // The room is written as digits: a JS number cannot hold most of [0, 2^63 - 1].
  return body.replace(/"bootstrap_room":0/, `"bootstrap_room":${room}`);
}

Deno.test("SGLang: the same body to both, concurrently; the room is matched digit for digit", async () => {
  const { prefill, decode, close } = pair("sglang");
  try {
    const room = "9223372036854775807";
    const body = sglangBody(prefill, room, { stream: true });
    const [p, d] = await Promise.all([
      post(chat(prefill), body, { "X-Request-Id": "r-9" }),
      post(chat(decode), body, { "X-Request-Id": "r-9" }),
    ]);
    assert.equal(p.status, 200);
    assert.equal(d.status, 200);
    const [ps, ds] = await Promise.all([readSse(p), readSse(d)]);
    assert.ok(ps.done && ds.done);
    const tokens = (s: Sse) =>
      s.events.filter((e) => (e.choices as { delta?: { content?: string } }[])[0]?.delta?.content)
        .length;
    assert.equal(tokens(ps), 1, "the prefill's own answer has one token (mini_lb drops it)");
    assert.equal(tokens(ds), 3);
    const [pr] = prefill.stats.requests;
    const [dr] = decode.stats.requests;
    assert.equal(pr.pd?.bootstrap?.room, room);
    assert.equal(dr.pd?.bootstrap?.room, room);
    assert.equal(dr.pd?.bootstrap?.host, "127.0.0.1");
    assert.equal(dr.pd?.key, `sglang|127.0.0.1:${prefill.pd!.bootstrapPort}|${room}`);
    assert.deepEqual(dr.pd?.matched, { instanceId: "p1", seq: 0, requestId: "r-9" });
    assert.deepEqual(pr.pd?.matched, { instanceId: "d1", seq: 0, requestId: "r-9" });
    assert.equal(pr.pd?.outcome, "ok");
    assert.equal(dr.pd?.outcome, "ok");
    assert.equal(prefill.flavour, "sglang");
    const health = await fetch(`http://${prefill.pd!.bootstrapAddr}/health`);
    assert.equal(await health.text(), "OK");
  } finally {
    await close();
  }
});

Deno.test("SGLang: rooms that round to the same double do not pair", async () => {
  const { prefill, decode, close } = pair("sglang", { timeoutMs: 80 });
  try {
    assert.equal(Number("9223372036854775806"), Number("9223372036854775807"));
    const [p, d] = await Promise.all([
      post(chat(prefill), sglangBody(prefill, "9223372036854775807")),
      post(chat(decode), sglangBody(prefill, "9223372036854775806")),
    ]);
    assert.equal(p.status, 500);
    assert.equal(d.status, 500);
    assert.match((await p.json()).error.message, /^Prefill transfer failed .*KVTransferError/);
    assert.match((await d.json()).error.message, /^Decode transfer failed .*KVTransferError/);
    assert.equal(prefill.stats.requests[0].pd?.outcome, "no_decode");
    assert.equal(decode.stats.requests[0].pd?.outcome, "timeout");
    assert.equal(prefill.load().running, 0, "the prefill let its KV go");
  } finally {
    await close();
  }
});

Deno.test("SGLang: a missing or malformed room is 400 on both roles", async () => {
  const { prefill, decode, close } = pair("sglang");
  try {
    const plain = JSON.stringify({ messages: [{ role: "user", content: "x" }] });
    for (const engine of [prefill, decode]) {
      const response = await post(chat(engine), plain);
      assert.equal(response.status, 400);
      assert.equal(
        (await response.json()).error.message,
        "Disaggregated request received without bootstrap room id",
      );
    }
    const malformed: [string, string][] = [
      [sglangBody(prefill, '"123"'), "bootstrap_room"],
      [sglangBody(prefill, "-1"), "bootstrap_room"],
      [sglangBody(prefill, "1.5"), "bootstrap_room"],
      [sglangBody(prefill, "1e3"), "bootstrap_room"],
      [sglangBody(prefill, "9223372036854775808"), "bootstrap_room"],
      [sglangBody(prefill, "[1, 2]"), "bootstrap_room"],
      [sglangBody(prefill, "7", { bootstrap_port: "8998" }), "bootstrap_port"],
      [sglangBody(prefill, "7", { bootstrap_host: null }), "bootstrap_host"],
    ];
    for (const [body, param] of malformed) {
      const response = await post(chat(decode), body);
      const error = (await response.json()).error;
      assert.equal(response.status, 400, `${body}: ${error.message}`);
      assert.equal(error.param, param, error.message);
    }
    assert.equal(decode.stats.pdByOutcome.invalid, malformed.length + 1);
    assert.equal(decode.stats.requests[1].pd?.bootstrap?.room, "123");
  } finally {
    await close();
  }
});

Deno.test("SGLang: unknown bootstrap server, a second decode for one room, a dead prefill", async () => {
  const { prefill, decode, close } = pair("sglang", { timeoutMs: 1000 });
  try {
    const unknown = await post(chat(decode), sglangBody(prefill, "1", { bootstrap_port: 1 }));
    assert.equal(unknown.status, 500);
    await unknown.body?.cancel();
    assert.equal(decode.stats.requests[0].pd?.outcome, "unknown_bootstrap");

    // Two decodes for one room: the second is refused, the first pairs with the prefill.
    const first = post(chat(decode), sglangBody(prefill, "2"));
    await eventually(() => decode.load().waiting === 1, 2_000, "the first decode waiting");
    const second = await post(chat(decode), sglangBody(prefill, "2"));
    assert.equal(second.status, 500);
    await second.body?.cancel();
    assert.equal(decode.stats.requests[2].pd?.outcome, "duplicate");
    const p = await post(chat(prefill), sglangBody(prefill, "2"));
    assert.equal(p.status, 200);
    await p.body?.cancel();
    const firstResponse = await first;
    assert.equal(firstResponse.status, 200);
    await firstResponse.body?.cancel();

    // A decode waiting on a prefill that dies notices through the bootstrap heartbeat.
    const started = performance.now();
    const waiting = post(chat(decode), sglangBody(prefill, "3"));
    await eventually(() => decode.load().waiting === 1, 2_000, "the decode waiting");
    await prefill.setFailure("refuse");
    const lost = await waiting;
    assert.equal(lost.status, 500);
    await lost.body?.cancel();
    assert.ok(performance.now() - started < 900, "failed before the 1 s timeout");
    assert.equal(decode.stats.requests.at(-1)!.pd?.outcome, "prefill_dead");
  } finally {
    await close();
  }
});

Deno.test("SGLang: a bare IPv6 bootstrap_host reaches no bootstrap server; in brackets it does", async () => {
  const { prefill, decode, close } = pair("sglang", { timeoutMs: 1000 });
  try {
    const bare = await post(chat(decode), sglangBody(prefill, "5", { bootstrap_host: "::1" }));
    assert.equal(bare.status, 500);
    assert.match((await bare.json()).error.message, /bootstrap server ::1:\d+$/);
    assert.equal(decode.stats.requests[0].pd?.outcome, "unknown_bootstrap");
    const body = sglangBody(prefill, "6", { bootstrap_host: "[::1]" });
    const [p, d] = await Promise.all([post(chat(prefill), body), post(chat(decode), body)]);
    assert.equal(p.status, 200);
    assert.equal(d.status, 200);
    await Promise.all([p.body?.cancel(), d.body?.cancel()]);
    assert.equal(decode.stats.requests[1].pd?.outcome, "ok");
  } finally {
    await close();
  }
});

// ---- shared pieces --------------------------------------------------------------------------

Deno.test("parseBody keeps the exact digits of a top-level bootstrap_room only", () => {
  const parsed = parseBody(
    '{"bootstrap_room": 18446744073709551615, "x": {"bootstrap_room": 5}}',
  );
  assert.equal(parsed.roomSource, "18446744073709551615");
  assert.equal(parseBody('{"x": {"bootstrap_room": 5}}').roomSource, undefined);
});

Deno.test("P/D options are checked before the engine listens", () => {
  assert.throws(
    () => startFakeEngine({ flavour: "vllm", pd: { protocol: "sglang", role: "prefill" } }),
    /needs flavour sglang/,
  );
  assert.throws(
    () => startFakeEngine({ pd: { protocol: "nope" as "sglang", role: "prefill" } }),
    /unknown pd.protocol/,
  );
});

Deno.test("demo cluster: a P/D variant emits disaggregation, roles and bootstrap ports", async () => {
  const cluster = await startDemoCluster({
    pd: { protocol: "sglang", prefill: 2, decode: 2 },
    timeScale: 0.01,
  });
  try {
    const config = cluster.routerConfig() as { models: Record<string, unknown>[] };
    const [model] = config.models;
    assert.deepEqual(model.disaggregation, { protocol: "sglang" });
    const instances = model.instances as Record<string, unknown>[];
    assert.deepEqual(instances.map((i) => [i.id, i.role, i.engine]), [
      ["prefill-a", "prefill", "sglang"],
      ["prefill-b", "prefill", "sglang"],
      ["decode-a", "decode", "sglang"],
      ["decode-b", "decode", "sglang"],
    ]);
    for (const instance of instances) {
      const engine = cluster.engines.find((e) => e.id === instance.id)!;
      if (instance.role === "prefill") {
        assert.equal(instance.bootstrapPort, engine.engine.pd!.bootstrapPort);
        assert.ok(Number.isInteger(instance.bootstrapPort));
      } else assert.equal(instance.bootstrapPort, undefined);
    }
    // One request through a prefill and a decode, with the real tokenizer and cache.
    const [p] = cluster.engines;
    const d = cluster.engines[2];
    const body = JSON.stringify({
      model: cluster.model,
      messages: [{ role: "user", content: "Tell me about disaggregation. ".repeat(200) }],
      max_tokens: 2,
      bootstrap_host: "127.0.0.1",
      bootstrap_port: p.bootstrapPort,
      bootstrap_room: 42,
    });
    const [pr, dr] = await Promise.all([
      post(`${p.engine.url}/v1/chat/completions`, body),
      post(`${d.engine.url}/v1/chat/completions`, body),
    ]);
    assert.equal(pr.status, 200);
    assert.equal(dr.status, 200);
    await pr.body?.cancel();
    const answer = await dr.json();
    assert.equal(answer.usage.completion_tokens, 2);
    assert.ok(p.cache.size > 0, "the prefill cached what it prefilled");
    assert.equal(d.cache.size, 0, "the decode prefilled nothing");
  } finally {
    await cluster.close();
  }
});

Deno.test("demo cluster: the vLLM variants; the neutral config is unchanged", async () => {
  const nixl = await startDemoCluster({ pd: { protocol: "vllm-nixl", prefill: 1, decode: 1 } });
  try {
    const model = (nixl.routerConfig() as { models: Record<string, unknown>[] }).models[0];
    assert.deepEqual(model.disaggregation, { protocol: "vllm-nixl" });
    assert.deepEqual(
      (model.instances as Record<string, unknown>[]).map((i) => Object.keys(i).sort()),
      [["id", "kvHost", "role", "url"], ["id", "kvHost", "role", "url"]],
      "NIXL has no bootstrap server",
    );
  } finally {
    await nixl.close();
  }
  const mooncake = await startDemoCluster({
    pd: { protocol: "vllm-mooncake", prefill: 1, decode: 1 },
  });
  try {
    const model = (mooncake.routerConfig() as { models: Record<string, unknown>[] }).models[0];
    const [prefill, decode] = model.instances as Record<string, unknown>[];
    assert.equal(prefill.bootstrapPort, mooncake.engines[0].engine.pd!.bootstrapPort);
    assert.equal(decode.role, "decode");
    assert.equal(prefill.engine, undefined);
  } finally {
    await mooncake.close();
  }
  const neutral = await startDemoCluster({ engines: 2 });
  try {
    const model = (neutral.routerConfig() as { models: Record<string, unknown>[] }).models[0];
    assert.equal(model.disaggregation, undefined);
    assert.deepEqual(
      (model.instances as Record<string, unknown>[]).map((i) => Object.keys(i).sort()),
      [["id", "kvHost", "url"], ["id", "kvHost", "url"]],
    );
    assert.deepEqual(neutral.engines.map((e) => e.engine.pd), [undefined, undefined]);
  } finally {
    await neutral.close();
  }
});

import assert from "node:assert/strict";
import { type OpenAiBody, roughTokenCount, startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { prefillSeconds } from "../../src/fakes/prefill_time.ts";
import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";
import { eventually } from "../support/eventually.ts";

interface SseRead {
  events: Record<string, unknown>[];
  done: boolean;
  /** Milliseconds (performance.now) at which each event arrived. */
  at: number[];
}

async function readSse(response: Response): Promise<SseRead> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const out: SseRead = { events: [], done: false, at: [] };
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      assert.ok(event.startsWith("data: "), `SSE event must start with "data: ": ${event}`);
      const data = event.slice(6);
      if (data === "[DONE]") out.done = true;
      else {
        out.events.push(JSON.parse(data));
        out.at.push(performance.now());
      }
    }
  }
  assert.equal(buffer, "", "no partial event left over");
  return out;
}

function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
) {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    signal,
  });
}

const chatBody = (extra: OpenAiBody = {}) => ({
  model: "fake-model",
  messages: [{ role: "user", content: "Hello there" }],
  ...extra,
});

Deno.test("a streamed chat completion has OpenAI's chunk shapes, a usage chunk and [DONE]", async () => {
  const engine = startFakeEngine({ id: "e1", countTokens: () => 100 });
  try {
    const response = await post(
      `${engine.url}/v1/chat/completions`,
      chatBody({ stream: true, max_tokens: 3, stream_options: { include_usage: true } }),
      {
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "x-request-id": "r1",
      },
    );
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("x-fake-engine"), "e1");
    assert.equal(response.headers.get("x-request-id"), "r1");
    assert.match(response.headers.get("content-type")!, /^text\/event-stream/);
    const sse = await readSse(response);
    assert.ok(sse.done, "ends with data: [DONE]");
    // role chunk, 3 tokens, finish chunk, usage chunk
    assert.equal(sse.events.length, 6);
    const [role, ...rest] = sse.events;
    const id = role.id as string;
    assert.match(id, /^chatcmpl-/);
    for (const event of sse.events) {
      assert.equal(event.object, "chat.completion.chunk");
      assert.equal(event.id, id);
      assert.equal(event.model, "fake-model");
      assert.equal(typeof event.created, "number");
    }
    assert.deepEqual(role.choices, [{
      index: 0,
      delta: { role: "assistant", content: "" },
      logprobs: null,
      finish_reason: null,
    }]);
    assert.equal(role.usage, null);
    const tokens = rest.slice(0, 3).map((e) => (e.choices as { delta: { content: string } }[])[0]);
    assert.deepEqual(tokens.map((c) => c.delta.content), [" The", " quick", " brown"]);
    assert.deepEqual(rest[3].choices, [{
      index: 0,
      delta: {},
      logprobs: null,
      finish_reason: "length",
    }]);
    assert.deepEqual(rest[4].choices, []);
    assert.deepEqual(rest[4].usage, {
      prompt_tokens: 100,
      completion_tokens: 3,
      total_tokens: 103,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    const record = engine.stats.requests[0];
    assert.equal(record.traceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    assert.equal(record.requestId, "r1");
    assert.equal(record.stream, true);
    assert.deepEqual(record.body?.messages, chatBody().messages);
    assert.ok(record.firstByteAtMs! >= record.arrivedAtMs);
    assert.equal(record.outcome, "ok");
    assert.equal(engine.stats.served, 1);
  } finally {
    await engine.close();
  }
});

Deno.test("a streamed completion sends text_completion chunks without usage unless asked", async () => {
  const engine = startFakeEngine();
  try {
    const response = await post(`${engine.url}/v1/completions`, {
      model: "fake-model",
      prompt: [1, 2, 3, 4, 5],
      stream: true,
      max_tokens: 2,
    });
    const sse = await readSse(response);
    assert.ok(sse.done);
    assert.equal(sse.events.length, 3);
    for (const event of sse.events) {
      assert.equal(event.object, "text_completion");
      assert.match(event.id as string, /^cmpl-/);
      assert.ok(!("usage" in event), "no usage field without stream_options.include_usage");
    }
    assert.deepEqual(sse.events[0].choices, [{
      index: 0,
      text: " The",
      logprobs: null,
      finish_reason: null,
    }]);
    assert.deepEqual(sse.events[2].choices, [{
      index: 0,
      text: "",
      logprobs: null,
      finish_reason: "length",
    }]);
    assert.equal(engine.stats.requests[0].promptTokens, 5, "token-id prompts are counted exactly");
  } finally {
    await engine.close();
  }
});

Deno.test("non-stream answers carry usage with cached tokens and stop early when asked", async () => {
  const engine = startFakeEngine({
    countTokens: () => 1000,
    cachedTokens: () => 768,
    completionTokens: () => 2,
  });
  try {
    const chat = await (await post(
      `${engine.url}/v1/chat/completions`,
      chatBody({
        max_completion_tokens: 5,
      }),
    )).json();
    assert.equal(chat.object, "chat.completion");
    assert.deepEqual(chat.choices, [{
      index: 0,
      message: { role: "assistant", content: " The quick", refusal: null },
      logprobs: null,
      finish_reason: "stop",
    }]);
    assert.deepEqual(chat.usage, {
      prompt_tokens: 1000,
      completion_tokens: 2,
      total_tokens: 1002,
      prompt_tokens_details: { cached_tokens: 768 },
    });
    const text = await (await post(`${engine.url}/v1/completions`, {
      prompt: "hello",
      max_tokens: 2,
    })).json();
    assert.equal(text.object, "text_completion");
    assert.deepEqual(text.choices, [{
      index: 0,
      text: " The quick",
      logprobs: null,
      finish_reason: "length",
    }]);
  } finally {
    await engine.close();
  }
});

Deno.test("max_tokens defaults to 16 and a wrong model or bad JSON gets OpenAI errors", async () => {
  const engine = startFakeEngine();
  try {
    const answer = await (await post(`${engine.url}/v1/completions`, { prompt: "x" })).json();
    assert.equal(answer.usage.completion_tokens, 16);
    const wrong = await post(`${engine.url}/v1/completions`, { model: "other", prompt: "x" });
    assert.equal(wrong.status, 404);
    const error = await wrong.json();
    assert.equal(error.error.code, 404);
    assert.equal(error.error.param, "model");
    const bad = await fetch(`${engine.url}/v1/chat/completions`, { method: "POST", body: "{" });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.type, "BadRequestError");
    assert.equal(engine.stats.byOutcome.not_found, 1);
    assert.equal(engine.stats.byOutcome.bad_request, 1);
  } finally {
    await engine.close();
  }
});

Deno.test("roughTokenCount() counts chat messages and strings at about 4 characters a token", () => {
  assert.equal(roughTokenCount({ prompt: "abcdefgh" }), 2);
  assert.equal(roughTokenCount({ prompt: [[1, 2], [3]] }), 3);
  assert.equal(
    roughTokenCount({ messages: [{ role: "user", content: [{ type: "text", text: "abcd" }] }] }),
    3 + 4 + 1,
  );
});

Deno.test("the first token arrives after the scaled prefill time of the uncached tokens", async () => {
  const timeScale = 0.01;
  const engine = startFakeEngine({
    timeScale,
    countTokens: (body) => Number(body.user),
    cachedTokens: (body) => Number(body.cached ?? 0),
  });
  try {
    const ttft = async (tokens: number, cached = 0) => {
      const started = performance.now();
      const response = await post(`${engine.url}/v1/completions`, {
        prompt: "x",
        user: String(tokens),
        cached,
        stream: true,
        max_tokens: 1,
      });
      const sse = await readSse(response);
      return sse.at[0] - started;
    };
    const expected = prefillSeconds(40_000) * timeScale * 1000; // ~59 ms
    const measured = await ttft(40_000);
    assert.ok(
      measured >= expected * 0.95 && measured < expected + 150,
      `TTFT ${measured.toFixed(1)} ms, expected ~${expected.toFixed(1)} ms`,
    );
    // 36k of 40k cached: only 4k new tokens, attending to the cached ones.
    const expectedCached = prefillSeconds(4_000, 36_000) * timeScale * 1000; // ~7 ms
    const measuredCached = await ttft(40_000, 36_000);
    assert.ok(
      measuredCached >= expectedCached * 0.95 && measuredCached < expected * 0.6,
      `cached TTFT ${measuredCached.toFixed(1)} ms, expected ~${expectedCached.toFixed(1)} ms`,
    );
  } finally {
    await engine.close();
  }
});

Deno.test("prefills run one at a time in arrival order while /metrics shows the queue", async () => {
  const timeScale = 0.01;
  let releaseFirst!: () => void;
  const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
  const engine = startFakeEngine({
    timeScale,
    countTokens: () => 32_000,
    // The first prefill keeps the GPU until the test has looked at the queue behind it.
    onPrefilled: (body) => body.prompt === "0" ? firstHeld : undefined,
  });
  try {
    const one = prefillSeconds(32_000) * timeScale * 1000; // ~45 ms
    const started = performance.now();
    const firstTokens: Promise<number>[] = [];
    for (const i of [0, 1, 2]) {
      firstTokens.push((async () => {
        const sse = await readSse(
          await post(`${engine.url}/v1/completions`, {
            prompt: String(i),
            stream: true,
            max_tokens: 1,
          }),
        );
        return sse.at[0] - started;
      })());
      // Each request is in the engine before the next is sent: a well-defined arrival order.
      await eventually(
        () => engine.load().prefilling + engine.load().waiting === i + 1,
        2_000,
        `request ${i} prefilling or queued`,
      );
    }
    const load = engine.load();
    assert.equal(load.waiting, 2);
    assert.equal(load.prefilling, 1);
    const metrics = parsePrometheusText(await (await fetch(`${engine.url}/metrics`)).text(), {
      strict: true,
    });
    const gauge = (name: string) => metrics.samples.find((s) => s.name === name)?.value;
    assert.equal(gauge("vllm:num_requests_waiting"), 2);
    assert.equal(gauge("vllm:num_requests_running"), 1);
    releaseFirst();
    const times = await Promise.all(firstTokens);
    for (let i = 0; i < 3; i++) {
      assert.ok(times[i] >= one * (i + 1) * 0.95, `request ${i} first token at ${times[i]} ms`);
    }
    assert.ok(times[0] < times[1] && times[1] < times[2], `FIFO order: ${times}`);
    const records = [...engine.stats.requests].sort((a, b) => a.seq - b.seq);
    for (let i = 1; i < 3; i++) {
      assert.ok(
        records[i].prefillStartedAtMs! >= records[i - 1].prefillEndedAtMs! - 1,
        "a prefill starts only after the previous one ended",
      );
    }
  } finally {
    await engine.close();
  }
});

Deno.test("decodes run concurrently: two streams decode at the same time, not one after the other", async () => {
  const timeScale = 0.01;
  // 10 tokens at 0.5 s (engine) = 5 ms apart: ~45 ms of decode each. The records' clock is a
  // counter: their times say in which order things happened, nothing else (how long the two
  // streams take is tests/bench/timing_bench.ts's).
  let tick = 0;
  const engine = startFakeEngine({
    timeScale,
    decodeSecondsPerToken: 0.5,
    countTokens: () => 1,
    now: () => ++tick,
  });
  try {
    const streams = await Promise.all([0, 1].map(async () =>
      await readSse(
        await post(`${engine.url}/v1/completions`, {
          prompt: "x",
          stream: true,
          max_tokens: 10,
        }),
      )
    ));
    assert.ok(streams.every((sse) => sse.done), "both streams end with [DONE]");
    // A decode runs from the end of its prefill to its last token: the two overlap.
    const [a, b] = engine.stats.requests;
    assert.ok(
      Math.max(a.prefillEndedAtMs!, b.prefillEndedAtMs!) < Math.min(a.endedAtMs!, b.endedAtMs!),
      `decodes one after the other: ${
        JSON.stringify([a, b].map((r) => [r.prefillEndedAtMs, r.endedAtMs]))
      }`,
    );
  } finally {
    await engine.close();
  }
});

Deno.test("hooks see the body and instance id, and cache writes land before the first token", async () => {
  const held = new Map<string, number>();
  const calls: string[] = [];
  let landWrite!: () => void;
  const writeLanded = new Promise<void>((resolve) => (landWrite = resolve));
  const engine = startFakeEngine({
    id: "gpu-7",
    countTokens: () => 512,
    cachedTokens: (body, instanceId) => {
      calls.push(`cached:${instanceId}:${body.prompt}`);
      return held.get(String(body.prompt)) ?? 0;
    },
    onPrefilled: async (body, instanceId) => {
      await writeLanded; // a store write the test lets land
      calls.push(`prefilled:${instanceId}`);
      held.set(String(body.prompt), 512);
    },
  });
  try {
    const answer = post(`${engine.url}/v1/completions`, { prompt: "p", max_tokens: 1 });
    await eventually(
      () => engine.stats.requests[0]?.prefillEndedAtMs !== undefined,
      2_000,
      "the first prefill done",
    );
    assert.equal(engine.stats.requests[0].firstByteAtMs, undefined, "no byte before the write");
    landWrite();
    const first = await (await answer).json();
    assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
    const second =
      await (await post(`${engine.url}/v1/completions`, { prompt: "p", max_tokens: 1 }))
        .json();
    assert.equal(second.usage.prompt_tokens_details.cached_tokens, 512);
    assert.deepEqual(calls, [
      "cached:gpu-7:p",
      "prefilled:gpu-7",
      "cached:gpu-7:p",
      "prefilled:gpu-7",
    ]);
    assert.equal(engine.stats.prefixCacheQueries, 1024);
    assert.equal(engine.stats.prefixCacheHits, 512);
  } finally {
    await engine.close();
  }
});

Deno.test("refuse closes the port and none reopens the same port", async () => {
  const engine = startFakeEngine();
  try {
    const port = engine.port;
    await engine.setFailure("refuse");
    await assert.rejects(fetch(`${engine.url}/health`));
    await engine.setFailure("none");
    assert.equal(engine.port, port);
    const health = await fetch(`${engine.url}/health`);
    await health.body?.cancel();
    assert.equal(health.status, 200);
  } finally {
    await engine.close();
  }
});

Deno.test("hang accepts the request and sends nothing until the client gives up", async () => {
  const engine = startFakeEngine();
  try {
    await engine.setFailure("hang");
    const started = performance.now();
    await assert.rejects(
      fetch(`${engine.url}/v1/completions`, {
        method: "POST",
        body: JSON.stringify({ prompt: "x" }),
        signal: AbortSignal.timeout(80),
      }),
      (e: Error) => e.name === "TimeoutError",
    );
    assert.ok(performance.now() - started >= 75);
    await assert.rejects(fetch(`${engine.url}/health`, { signal: AbortSignal.timeout(50) }));
    assert.equal(engine.stats.byOutcome.hang, 1);
    await engine.setFailure("none");
    const health = await fetch(`${engine.url}/health`);
    await health.body?.cancel();
    assert.equal(health.status, 200);
  } finally {
    await engine.close();
  }
});

Deno.test("http500 and http503 answer an OpenAI error before any byte of output", async () => {
  const engine = startFakeEngine();
  try {
    for (const [mode, status] of [["http500", 500], ["http503", 503]] as const) {
      await engine.setFailure(mode);
      const response = await post(`${engine.url}/v1/chat/completions`, chatBody({ stream: true }));
      assert.equal(response.status, status);
      assert.equal(response.headers.get("content-type"), "application/json");
      const body = await response.json();
      assert.equal(body.error.code, status);
      assert.equal(typeof body.error.message, "string");
      assert.equal(engine.stats.byOutcome[mode], 1);
    }
    const health = await fetch(`${engine.url}/health`);
    await health.body?.cancel();
    assert.equal(health.status, 503, "a broken engine's /health fails too by default");
    await engine.setFailure("http500", { allEndpoints: false });
    const ok = await fetch(`${engine.url}/health`);
    await ok.body?.cancel();
    assert.equal(ok.status, 200);
  } finally {
    await engine.close();
  }
});

Deno.test("midstream sends the first chunk and then cuts the connection", async () => {
  const engine = startFakeEngine();
  try {
    await engine.setFailure("midstream");
    const response = await post(`${engine.url}/v1/completions`, {
      prompt: "x",
      stream: true,
      max_tokens: 5,
    });
    assert.equal(response.status, 200);
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let received = "";
    await assert.rejects(async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        received += value;
      }
    });
    assert.match(received, /^data: \{.*"text":" The".*\}\n\n$/s);
    assert.ok(!received.includes("[DONE]"));
    assert.equal(engine.stats.byOutcome.midstream, 1);
    // Non-stream: the JSON is cut short.
    const whole = await post(`${engine.url}/v1/completions`, { prompt: "x" });
    await assert.rejects(whole.json());
  } finally {
    await engine.close();
  }
});

Deno.test("slow_first_byte delays the answer, then answers normally", async () => {
  const engine = startFakeEngine();
  try {
    await engine.setFailure("slow_first_byte", { delayMs: 120 });
    const started = performance.now();
    const response = await post(`${engine.url}/v1/completions`, { prompt: "x", max_tokens: 1 });
    const elapsed = performance.now() - started;
    assert.equal(response.status, 200);
    assert.equal((await response.json()).object, "text_completion");
    assert.ok(elapsed >= 115, `answered after ${elapsed} ms`);
  } finally {
    await engine.close();
  }
});

Deno.test("a starting engine answers 503 on /health and inference until it is ready", async () => {
  const engine = startFakeEngine({ ready: false });
  try {
    const health = await fetch(`${engine.url}/health`);
    await health.body?.cancel();
    assert.equal(health.status, 503);
    const inference = await post(`${engine.url}/v1/completions`, { prompt: "x" });
    assert.equal(inference.status, 503);
    await inference.body?.cancel();
    engine.setReady(true);
    const ready = await fetch(`${engine.url}/health`);
    await ready.body?.cancel();
    assert.equal(ready.status, 200);
    const models = await (await fetch(`${engine.url}/v1/models`)).json();
    assert.equal(models.data[0].id, "fake-model");
    assert.equal(engine.stats.byOutcome.not_ready, 1);
  } finally {
    await engine.close();
  }
});

Deno.test("vLLM /metrics has HELP and TYPE per family, engine labels, and old names on request", async () => {
  const engine = startFakeEngine({ dataParallelSize: 2 });
  const old = startFakeEngine({ oldNames: true });
  try {
    const text = await (await fetch(`${engine.url}/metrics`)).text();
    const parsed = parsePrometheusText(text, { strict: true });
    for (
      const family of [
        "vllm:num_requests_waiting",
        "vllm:num_requests_running",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
      ]
    ) {
      const info = parsed.families.get(family);
      assert.ok(info?.help && info.type, `${family} has HELP and TYPE`);
      const samples = parsed.samples.filter((s) => s.name === family);
      assert.deepEqual(samples.map((s) => s.labels.engine), ["0", "1"]);
      assert.ok(samples.every((s) => s.labels.model_name === "fake-model"));
    }
    assert.match(text, /^vllm:num_requests_waiting\{model_name="fake-model",engine="0"\} 0\.0$/m);
    // vLLM 0.32's split of the waiting by reason, per engine.
    const byReason = parsed.samples.filter((s) => s.name === "vllm:num_requests_waiting_by_reason");
    assert.deepEqual(
      byReason.map((s) => `${s.labels.engine}:${s.labels.reason}`),
      ["0:capacity", "0:deferred", "1:capacity", "1:deferred"],
    );
    const oldText = await (await fetch(`${old.url}/metrics`)).text();
    assert.match(oldText, /^vllm:gpu_cache_usage_perc\{/m);
    assert.doesNotMatch(oldText, /kv_cache_usage_perc/);
    assert.doesNotMatch(oldText, /waiting_by_reason/);
    const noLoad = await fetch(`${engine.url}/get_load`);
    await noLoad.body?.cancel();
    assert.equal(noLoad.status, 404, "vLLM has no /get_load");
  } finally {
    await engine.close();
    await old.close();
  }
});

Deno.test("SGLang /get_load reports pending prefill tokens per rank unless built without them", async () => {
  // At this time scale a 32k-token prefill takes ~45 s: the first is still under way, with the
  // other two queued behind it, however long the test takes to look; then their client leaves.
  const timeScale = 10;
  const engine = startFakeEngine({ flavour: "sglang", timeScale, countTokens: () => 32_000 });
  const old = startFakeEngine({ flavour: "sglang", omitPendingTokens: true, dataParallelSize: 2 });
  const client = new AbortController();
  try {
    const streams = [0, 1, 2].map(async () =>
      await (await post(
        `${engine.url}/v1/completions`,
        { prompt: "x", max_tokens: 1 },
        {},
        client.signal,
      )).json()
    );
    await eventually(() => engine.load().waiting === 2, 2_000, "two prompts queued");
    const [load] = await (await fetch(`${engine.url}/get_load`)).json();
    assert.equal(load.dp_rank, 0);
    assert.equal(load.num_waiting_reqs, 2);
    assert.equal(load.num_reqs, 3);
    // Two queued prompts in full plus most of the one being prefilled.
    assert.ok(
      load.num_pending_tokens > 64_000 && load.num_pending_tokens <= 96_000,
      `num_pending_tokens ${load.num_pending_tokens}`,
    );
    assert.equal(typeof load.ts_tic, "number");
    const metrics = parsePrometheusText(await (await fetch(`${engine.url}/metrics`)).text(), {
      strict: true,
    });
    const names = new Set(metrics.samples.map((s) => s.name));
    for (
      const name of [
        "sglang:num_queue_reqs",
        "sglang:num_running_reqs",
        "sglang:token_usage",
        "sglang:cache_hit_rate",
      ]
    ) assert.ok(names.has(name), name);
    client.abort();
    for (const outcome of await Promise.allSettled(streams)) {
      assert.equal(outcome.status, "rejected", "the client left before any answer");
    }
    await eventually(() => engine.stats.byOutcome.client_abort === 3, 2_000, "three aborts seen");
    const oldLoad = await (await fetch(`${old.url}/get_load`)).json();
    assert.equal(oldLoad.length, 2);
    assert.ok(oldLoad.every((entry: Record<string, unknown>) => !("num_pending_tokens" in entry)));
  } finally {
    await engine.close();
    await old.close();
  }
});

Deno.test("a client that goes away mid-stream frees its decode slot", async () => {
  const engine = startFakeEngine({ decodeSecondsPerToken: 1, countTokens: () => 1 });
  try {
    const response = await post(`${engine.url}/v1/completions`, {
      prompt: "x",
      stream: true,
      max_tokens: 1000,
    });
    const reader = response.body!.getReader();
    await reader.read();
    assert.equal(engine.load().decoding, 1);
    await reader.cancel();
    await eventually(() => engine.load().decoding === 0, 2_000, "the decode slot freed");
    assert.equal(engine.load().decoding, 0);
    assert.equal(engine.stats.byOutcome.client_abort, 1);
  } finally {
    await engine.close();
  }
});

Deno.test("close() ends streams and queued prefills in flight", async () => {
  const engine = startFakeEngine({ countTokens: () => 200_000, timeScale: 1 });
  const response = post(`${engine.url}/v1/completions`, { prompt: "x", stream: true });
  const pending = await response;
  await eventually(() => engine.load().prefilling === 1, 2_000, "the prefill under way");
  await engine.close();
  const sse = await readSse(pending).catch(() => undefined);
  assert.ok(!sse?.done, "the stream did not complete");
  assert.equal(engine.stats.byOutcome.engine_closed, 1);
});

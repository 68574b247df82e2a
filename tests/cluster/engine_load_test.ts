import assert from "node:assert/strict";
import {
  EngineLoadFormatError,
  readSglangLoad,
  readSglangMetrics,
  readVllmMetrics,
} from "../../src/cluster/engine_load.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { eventually } from "../support/eventually.ts";

const VLLM_NEW = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m",engine="0"} 4.0
vllm:num_requests_running{model_name="m",engine="1"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m",engine="0"} 3.0
vllm:num_requests_waiting{model_name="m",engine="1"} 1.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m",engine="0"} 0.5
vllm:kv_cache_usage_perc{model_name="m",engine="1"} 0.25
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m",engine="0"} 10.0
`;

// vLLM v0 names: one engine, no engine label, gpu_cache_usage_perc.
const VLLM_OLD = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 5.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 7.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.875
`;

Deno.test("readVllmMetrics() sums waiting and running over engines and averages KV usage", () => {
  assert.deepEqual(readVllmMetrics(VLLM_NEW, { observedAtMs: 42 }), {
    waitingRequests: 4,
    runningRequests: 6,
    kvUsage: 0.375,
    observedAtMs: 42,
  });
});

Deno.test("readVllmMetrics() reads the caches' size from cache_config_info, summed over engines", () => {
  const info = (engine: number, labels: string) =>
    `vllm:cache_config_info{block_size="16",engine="${engine}",${labels}} 1.0\n`;
  const both = VLLM_NEW + info(0, 'kv_cache_size_tokens="1000",num_gpu_blocks="50"') +
    info(1, 'num_gpu_blocks="100"');
  const report = readVllmMetrics(both, { observedAtMs: 0 });
  assert.equal(report.kvCapacityTokens, 1000 + 100 * 16);
  // Each engine's usage times its own size: 0.5 of 1,000 and 0.25 of 1,600.
  assert.equal(report.kvUsedTokens, 0.5 * 1000 + 0.25 * 1600);
  const unsized = readVllmMetrics(VLLM_NEW + info(0, 'num_gpu_blocks="None"'), { observedAtMs: 0 });
  assert.deepEqual([unsized.kvCapacityTokens, unsized.kvUsedTokens], [undefined, undefined]);
  const halfSized = readVllmMetrics(VLLM_NEW + info(0, 'num_gpu_blocks="50"'), { observedAtMs: 0 });
  assert.equal(halfSized.kvUsedTokens, undefined, "engine 1's usage has no size to weigh");
});

Deno.test("readVllmMetrics() reads old builds' gpu_cache_usage_perc", () => {
  assert.deepEqual(readVllmMetrics(VLLM_OLD, { observedAtMs: 1, modelName: "m" }), {
    waitingRequests: 7,
    runningRequests: 5,
    kvUsage: 0.875,
    observedAtMs: 1,
  });
});

Deno.test("readVllmMetrics() keeps only the named model and says which models exist", () => {
  const two = VLLM_NEW + VLLM_OLD.replaceAll('"m"', '"other"');
  assert.equal(readVllmMetrics(two, { observedAtMs: 0, modelName: "m" }).waitingRequests, 4);
  assert.equal(readVllmMetrics(two, { observedAtMs: 0, modelName: "other" }).waitingRequests, 7);
  assert.equal(readVllmMetrics(two, { observedAtMs: 0 }).waitingRequests, 11);
  assert.throws(
    () => readVllmMetrics(two, { observedAtMs: 0, modelName: "missing" }),
    (e: Error) =>
      e instanceof EngineLoadFormatError && /"missing"/.test(e.message) &&
      /"m", "other"/.test(e.message),
  );
});

Deno.test("readVllmMetrics() skips NaN gauges and leaves kvUsage out when absent", () => {
  const text =
    'vllm:num_requests_running{engine="0"} NaN\nvllm:num_requests_running{engine="1"} 2\n' +
    "vllm:num_requests_waiting 0\n";
  assert.deepEqual(readVllmMetrics(text, { observedAtMs: 0 }), {
    waitingRequests: 0,
    runningRequests: 2,
    observedAtMs: 0,
  });
});

Deno.test("readVllmMetrics() rejects a page without the request gauges", () => {
  assert.throws(
    () => readVllmMetrics("python_gc_objects_collected_total 1\n", { observedAtMs: 0 }),
    (e: Error) => e instanceof EngineLoadFormatError && /vllm:num_requests_waiting/.test(e.message),
  );
  assert.throws(
    () => readVllmMetrics("vllm:num_requests_waiting 1\n", { observedAtMs: 0 }),
    /vllm:num_requests_running/,
  );
});

Deno.test("readSglangLoad() sums data-parallel ranks, running being num_reqs minus waiting", () => {
  const json = [
    {
      dp_rank: 0,
      num_reqs: 12,
      num_waiting_reqs: 3,
      num_tokens: 45120,
      num_pending_tokens: 8192,
      ts_tic: 1.5,
    },
    {
      dp_rank: 1,
      num_reqs: 4,
      num_waiting_reqs: 1,
      num_tokens: 1000,
      num_pending_tokens: 100,
      ts_tic: 1.5,
    },
  ];
  assert.deepEqual(readSglangLoad(json, { observedAtMs: 9 }), {
    waitingRequests: 4,
    runningRequests: 12,
    pendingPrefillTokens: 8292,
    observedAtMs: 9,
  });
});

Deno.test("readSglangLoad() omits pending tokens unless every rank reports them", () => {
  const old = [{ dp_rank: 0, num_reqs: 2, num_waiting_reqs: 1, num_tokens: 10, ts_tic: 0 }];
  assert.deepEqual(readSglangLoad(old, { observedAtMs: 0 }), {
    waitingRequests: 1,
    runningRequests: 1,
    observedAtMs: 0,
  });
  const mixed = [
    { dp_rank: 0, num_reqs: 2, num_waiting_reqs: 1, num_tokens: 10, num_pending_tokens: 5 },
    { dp_rank: 1, num_reqs: 2, num_waiting_reqs: 1, num_tokens: 10 },
  ];
  assert.equal(readSglangLoad(mixed, { observedAtMs: 0 }).pendingPrefillTokens, undefined);
  const single = { num_reqs: 3, num_waiting_reqs: 0, num_tokens: 1, num_pending_tokens: 0 };
  assert.equal(readSglangLoad(single, { observedAtMs: 0 }).runningRequests, 3);
});

Deno.test("readSglangLoad() explains malformed answers", () => {
  assert.throws(() => readSglangLoad([], { observedAtMs: 0 }), /empty list/);
  assert.throws(() => readSglangLoad(["x"], { observedAtMs: 0 }), /expected an object/);
  assert.throws(
    () => readSglangLoad([{ dp_rank: 2, num_reqs: "1", num_waiting_reqs: 0 }], { observedAtMs: 0 }),
    (e: Error) => e instanceof EngineLoadFormatError && /rank 2: "num_reqs" is "1"/.test(e.message),
  );
  assert.throws(() => readSglangLoad([{ num_reqs: 1 }], { observedAtMs: 0 }), /num_waiting_reqs/);
});

Deno.test("readSglangMetrics() reads queue, running and token usage", () => {
  const text = `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",dp_rank="0"} 3.0
sglang:num_running_reqs{model_name="m",dp_rank="1"} 1.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",dp_rank="0"} 2.0
sglang:num_queue_reqs{model_name="m",dp_rank="1"} 0.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m",dp_rank="0"} 0.2
sglang:token_usage{model_name="m",dp_rank="1"} 0.4
`;
  assert.deepEqual(readSglangMetrics(text, { observedAtMs: 3, modelName: "m" }), {
    waitingRequests: 2,
    runningRequests: 4,
    kvUsage: 0.30000000000000004,
    observedAtMs: 3,
  });
  // Old SGLang labelled the model `name`.
  const old = text.replaceAll("model_name=", "name=");
  assert.equal(readSglangMetrics(old, { observedAtMs: 0, modelName: "m" }).waitingRequests, 2);
  assert.throws(() => readSglangMetrics("x 1", { observedAtMs: 0 }), /--enable-metrics/);
});

Deno.test("the readers agree with what the fake engines hold while requests queue", async () => {
  // At this time scale a 32k-token prefill takes ~45 s: each engine's first is still under way,
  // with two queued behind it, however long the test takes to look; then their client leaves.
  const timeScale = 10;
  const vllm = startFakeEngine({ timeScale, countTokens: () => 32_000, dataParallelSize: 2 });
  const sglang = startFakeEngine({ flavour: "sglang", timeScale, countTokens: () => 32_000 });
  const client = new AbortController();
  try {
    const requests = [vllm, sglang].flatMap((engine) =>
      [0, 1, 2].map(async () => {
        const response = await fetch(`${engine.url}/v1/completions`, {
          method: "POST",
          body: JSON.stringify({ prompt: "x", max_tokens: 1 }),
          signal: client.signal,
        });
        await response.json();
      })
    );
    await eventually(
      () => vllm.load().waiting === 2 && sglang.load().waiting === 2,
      2_000,
      "two prompts queued on each engine",
    );
    const fromVllm = readVllmMetrics(await (await fetch(`${vllm.url}/metrics`)).text(), {
      observedAtMs: 0,
      modelName: "fake-model",
    });
    assert.equal(fromVllm.waitingRequests, vllm.load().waiting);
    assert.equal(fromVllm.waitingRequests, 2);
    assert.equal(fromVllm.runningRequests, 1);
    assert.ok(fromVllm.kvUsage! >= 0 && fromVllm.kvUsage! <= 1);
    const fromSglang = readSglangLoad(await (await fetch(`${sglang.url}/get_load`)).json(), {
      observedAtMs: 0,
    });
    assert.equal(fromSglang.waitingRequests, 2);
    assert.equal(fromSglang.runningRequests, 1);
    assert.ok(fromSglang.pendingPrefillTokens! > 64_000);
    client.abort();
    for (const outcome of await Promise.allSettled(requests)) {
      assert.equal(outcome.status, "rejected", "the client left before any answer");
    }
    await eventually(
      () => vllm.stats.byOutcome.client_abort === 3 && sglang.stats.byOutcome.client_abort === 3,
      2_000,
      "every request ended by its client",
    );
  } finally {
    await vllm.close();
    await sglang.close();
  }
});

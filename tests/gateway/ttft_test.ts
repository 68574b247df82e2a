/**
 * TTFT is observable only for streamed answers: a non-streamed answer's first byte comes after
 * the whole generation. Only streamed, really tokenized requests train the prefill model.
 */
import { assert, assertEquals } from "../assert.ts";
import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";
import type { RequestRecord } from "../../src/contracts.ts";
import {
  completion,
  loadOnlyModel,
  MODEL,
  range,
  startRouter,
  startTestCluster,
} from "../support/harness.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";

async function ttftCount(url: string): Promise<number> {
  const samples = parsePrometheusText(await (await fetch(`${url}/metrics`)).text()).samples;
  return samples.filter((s) => s.name === "tidegate_ttft_seconds_count")
    .reduce((sum, s) => sum + s.value, 0);
}

Deno.test("a non-streamed answer records its duration but no TTFT, and does not train the prefill model", async () => {
  // A long generation: the whole answer takes far longer than its prefill.
  const t = await startTestCluster({ engines: 1, engine: { decodeSecondsPerToken: 0.02 } });
  try {
    const response = await completion(t.url, { prompt: range(1, 64), max_tokens: 20 });
    assertEquals(response.status, 200);
    await response.json();
    assertEquals(await ttftCount(t.url), 0, "tidegate_ttft_seconds has no sample");
    const runtime = t.router.registry.runtime(MODEL)!;
    assertEquals(runtime.prefillEstimators.get("e0")?.sampleCount ?? 0, 0);
    assertEquals(runtime.cluster.get("e0")!.recentTtftS.length, 0);

    const streamed = await completion(t.url, {
      prompt: range(1, 64),
      max_tokens: 20,
      stream: true,
    });
    await streamed.text();
    assertEquals(await ttftCount(t.url), 1);
    assertEquals(runtime.prefillEstimators.get("e0")?.sampleCount, 1);
  } finally {
    await t.close();
  }
});

Deno.test("the record of a non-streamed request has a duration and no ttftS; a streamed one has both, TTFT first", async () => {
  const engine = startFakeEngine({
    id: "e0",
    model: "m",
    timeScale: 0.001,
    decodeSecondsPerToken: 0.01,
  });
  const records: RequestRecord[] = [];
  const { router, url } = await startRouter(
    [loadOnlyModel("m", { instances: [{ id: "e0", url: engine.url }] })],
    { background: false, observers: [{ onFinished: (r) => records.push(r) }] },
  );
  try {
    const body = { model: "m", prompt: [1, 2, 3], max_tokens: 10 };
    await (await completion(url, body)).json();
    await (await completion(url, { ...body, stream: true })).text();
    const [plain, streamed] = records;
    assertEquals([plain.stream, plain.ttftS], [false, undefined]);
    assert(plain.durationS! > 0);
    assert(streamed.stream && streamed.ttftS! > 0 && streamed.ttftS! < streamed.durationS!);
  } finally {
    await router.close();
    await engine.close();
  }
});

Deno.test("estimated token counts never train the prefill model: only tokenized prompts do", async () => {
  // tokenizer mode none: a text prompt's tokens are a chars/4 estimate ("disabled").
  const engine = startFakeEngine({ id: "e0", model: "m", timeScale: 0.001 });
  const { router, url } = await startRouter(
    [loadOnlyModel("m", { instances: [{ id: "e0", url: engine.url }] })],
    { background: false },
  );
  try {
    const runtime = router.registry.runtime("m")!;
    const text = await completion(url, { model: "m", prompt: "x".repeat(4000), stream: true });
    await text.text();
    assertEquals(runtime.prefillEstimators.get("e0")?.sampleCount ?? 0, 0, "estimate: no sample");
    const ids = await completion(url, { model: "m", prompt: range(1, 1000), stream: true });
    await ids.text();
    assertEquals(runtime.prefillEstimators.get("e0")?.sampleCount, 1, "token ids: one sample");
  } finally {
    await router.close();
    await engine.close();
  }
});

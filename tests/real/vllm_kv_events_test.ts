/**
 * Engine KV events from real vLLM publishers (#25): the router's mirror of an engine's own prefix
 * cache (src/kv/events/), fed by the real ZMQ publisher and its replay socket, survives a late
 * start, lost messages and an engine restart, and drops what the engine evicts to make room; and
 * a router with `kvEvents` and no other source of hits (no store, no predicted index) sends a
 * follow-up to the engine holding its prefix, predicting exactly the engine's `cached_tokens`.
 */
import { assert, assertEquals } from "../assert.ts";
import { systemTimers } from "../../src/cluster/timers.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import { EngineBlockIndex } from "../../src/kv/events/engine_block_index.ts";
import { EngineEventFeed } from "../../src/runtime/engine_event_feed.ts";
import { blockId } from "../../src/kv/events/engine_kv_event.ts";
import { zmtpSockets } from "../../src/runtime/kv_event_sockets.ts";
import { eventually } from "../support/eventually.ts";
import { eventsOnlyRouter } from "./events_only_router.ts";
import { REAL } from "./real_env.ts";
import { CPU_BLOCK_SIZE, kvEventEndpoints, startVllm, type VllmEngine } from "./vllm_engine.ts";

const scheme = createKeyScheme({ hash: "sha256", chunkSize: CPU_BLOCK_SIZE, keyFormat: "{hex}" });

/** A token-id prompt of `blocks` full blocks and a few tokens more, different for each `n`. */
function prompt(n: number, blocks: number): number[] {
  return Array.from(
    { length: blocks * CPU_BLOCK_SIZE + 5 },
    (_, i) => 1000 + ((i * 37 + n * 1009) % 40_000),
  );
}

const blockIds = (tokens: number[]) => scheme.blockHashes(tokens).map(blockId);

async function complete(url: string, tokens: number[]): Promise<Response> {
  const response = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: REAL.modelName, prompt: tokens, max_tokens: 1 }),
  });
  if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);
  return response;
}

async function cachedTokens(url: string, tokens: number[]): Promise<number> {
  const body = await (await complete(url, tokens)).json();
  return body.usage?.prompt_tokens_details?.cached_tokens ?? 0;
}

function feedOn(ends: { pub: string; replay: string }, index: EngineBlockIndex): EngineEventFeed {
  const feed = new EngineEventFeed({
    instanceId: "v0",
    endpoint: ends.pub,
    replayEndpoint: ends.replay,
    index,
    sockets: zmtpSockets(),
    timers: systemTimers(),
    now: () => performance.now(),
    resyncIntervalMs: 1_000,
    log: () => {},
  });
  feed.start();
  return feed;
}

Deno.test("real vLLM KV events: the mirror survives a late start, lost messages and a restart", async () => {
  const ends = await kvEventEndpoints();
  const vllm = (startTimeoutMs: number) =>
    startVllm({ kvEventsEndpoint: ends.pub, kvEventsReplayEndpoint: ends.replay, startTimeoutMs });
  let engine: VllmEngine | undefined = await vllm(600_000);
  const index = new EngineBlockIndex();
  let feed: EngineEventFeed | undefined;
  try {
    const [a, b, c, d] = [prompt(1, 3), prompt(2, 4), prompt(3, 2), prompt(4, 3)];
    // Late start: A was cached before anyone listened; the feed's first replay brings it.
    await complete(engine.url, a);
    feed = feedOn(ends, index);
    await eventually(() => index.prefixBlocks(blockIds(a)) === 3, 30_000, "A from the replay");
    assertEquals(index.blockSize, CPU_BLOCK_SIZE);

    // Loss: B's events are published while no one listens; the new feed's catch-up replay (or
    // the gap C's events show) brings them back.
    await feed.stop();
    const before = index.counters.resynced;
    await complete(engine.url, b);
    feed = feedOn(ends, index);
    await complete(engine.url, c);
    await eventually(
      () => index.prefixBlocks(blockIds(b)) === 4 && index.prefixBlocks(blockIds(c)) === 2,
      30_000,
      () => `B and C after the loss (${JSON.stringify(index.counters)}, ${index.state})`,
    );
    assert(index.counters.resynced > before, `replayed: ${JSON.stringify(index.counters)}`);
    // The catch-up found the mirror's last batch again: the same publisher, not a restart.
    assertEquals(index.counters.restarts, 0, JSON.stringify(index.counters));
    // What the mirror says is what the engine reuses.
    const cached = await cachedTokens(engine.url, [...a, 7, 8, 9]);
    assertEquals(cached, (index.prefixBlocks(blockIds(a)) ?? -1) * CPU_BLOCK_SIZE);

    // Restart: the new engine's publisher starts again at seq 0, on the same endpoints. Its
    // first batches may come before the subscription is back or after: either way the catch-up
    // on reconnecting finds another publisher.
    await engine.stop();
    engine = undefined;
    engine = await vllm(600_000);
    await complete(engine.url, d);
    await eventually(
      () => index.counters.restarts >= 1 && index.prefixBlocks(blockIds(d)) === 3,
      30_000,
      () => `D after the restart (${JSON.stringify(index.counters)}, ${index.state})`,
    );
    assertEquals(index.prefixBlocks(blockIds(a)), 0, "the old engine's blocks are gone");
    assert(index.counters.disconnects >= 1, JSON.stringify(index.counters));
    assertEquals(index.state, "exact");
  } finally {
    await feed?.stop();
    await engine?.stop();
  }
});

Deno.test("real vLLM KV events: blocks the engine evicts for new prompts leave the mirror", async () => {
  // 24 blocks: five prompts of six blocks each cannot all stay, so the first is evicted.
  const ends = await kvEventEndpoints();
  const engine = await startVllm({
    kvEventsEndpoint: ends.pub,
    kvEventsReplayEndpoint: ends.replay,
    args: ["--num-gpu-blocks-override", "24", "--max-model-len", "2048"],
    startTimeoutMs: 600_000,
  });
  const index = new EngineBlockIndex();
  const feed = feedOn(ends, index);
  try {
    const [a, ...others] = [1, 2, 3, 4, 5].map((n) => prompt(20 + n, 5));
    await complete(engine.url, a);
    await eventually(() => index.prefixBlocks(blockIds(a)) === 5, 30_000, "A stored");
    for (const other of others) await complete(engine.url, other);
    // The last prompt's blocks are stored after the evictions that made room for them.
    const last = others[others.length - 1];
    await eventually(
      () => index.prefixBlocks(blockIds(last)) === 5,
      30_000,
      () => `the last prompt stored (${JSON.stringify(index.counters)})`,
    );
    const left = index.prefixBlocks(blockIds(a)) ?? -1;
    assert(left < 5, `A's blocks evicted from the mirror: ${left} of 5 left`);
    // What the mirror still says of A is what the engine reuses of it.
    assertEquals(await cachedTokens(engine.url, [...a, 7, 8, 9]), left * CPU_BLOCK_SIZE);
  } finally {
    await feed.stop();
    await engine.stop();
  }
});

Deno.test("real vLLM KV events: with only the engines' events the router follows the prefix", async () => {
  const ends = [await kvEventEndpoints(), await kvEventEndpoints()];
  const engines = await Promise.all(ends.map((e) =>
    startVllm({
      kvEventsEndpoint: e.pub,
      kvEventsReplayEndpoint: e.replay,
      startTimeoutMs: 600_000,
    })
  ));
  const router = await eventsOnlyRouter(engines, ends);
  try {
    const { port } = await router.serve({ hostname: "127.0.0.1", port: 0 });
    const url = `http://127.0.0.1:${port}`;
    const caches = router.registry.runtime(REAL.modelName)!.engineCaches;
    // Each document first straight to one engine, so only that engine's events can tell.
    const docs = [prompt(11, 5), prompt(12, 5), prompt(13, 5), prompt(14, 5)];
    for (const [n, doc] of docs.entries()) await complete(engines[n % 2].url, doc);
    await eventually(
      () => docs.every((doc, n) => caches.get(`v${n % 2}`)!.prefixBlocks(blockIds(doc)) === 5),
      30_000,
      "both mirrors to hold their documents",
    );
    for (const [n, doc] of docs.entries()) {
      const response = await complete(url, [...doc, 4242, n]);
      const body = await response.json();
      assertEquals(response.headers.get("x-tidegate-instance"), `v${n % 2}`, `document ${n}`);
      const predicted = Number(response.headers.get("x-tidegate-hit-tokens"));
      assertEquals(predicted, 5 * CPU_BLOCK_SIZE, `document ${n}: the predicted hit`);
      assertEquals(body.usage.prompt_tokens_details.cached_tokens, predicted, `document ${n}`);
    }
  } finally {
    await router.close();
    await Promise.all(engines.map((e) => e.stop()));
  }
});

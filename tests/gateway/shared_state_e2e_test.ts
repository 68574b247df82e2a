/**
 * Three router processes (`cli/main.ts start`) sharing their dispatch-time facts through a real
 * redis-server (cluster.sharedState), in front of one fake cluster whose store never learns the
 * new prefix: only the shared predictions can tell the replicas where it is being written.
 */
import { assert, assertEquals } from "../assert.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { startFakeMooncakeMaster } from "../../src/fakes/fake_mooncake_master.ts";
import { redisServerMissing, startRedisServer } from "../support/redis_server.ts";
import { testNeeding } from "../support/needs_tool.ts";
import { completion, range } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import {
  type RouterProcess,
  startRouterProcess,
  writeRouterConfig,
} from "../support/router_process.ts";

const MODEL = "shared-model";

/** Sum of a /metrics series' samples on one replica, filtered by label text. */
async function metric(router: RouterProcess, name: string, label = ""): Promise<number> {
  const text = await (await fetch(`${router.url}/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith(name) && l.includes(label))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
}

async function send(router: RouterProcess, prompt: number[], maxTokens = 2): Promise<string> {
  const response = await completion(router.url, { model: MODEL, prompt, max_tokens: maxTokens });
  assertEquals(response.status, 200);
  await response.text();
  return response.headers.get("x-tidegate-instance")!;
}

testNeeding(await redisServerMissing(), {
  name:
    "three replicas sharing state through Redis land a burst like one router, agree on load, and lose no request when Redis dies",
  fn: async () => {
    const redis = await startRedisServer();
    const master = await startFakeMooncakeMaster();
    const engines = await Promise.all(
      range(0, 4).map((i) =>
        startFakeEngine({
          id: `e${i}`,
          model: MODEL,
          timeScale: 0.001,
          decodeSecondsPerToken: 0.002,
        })
      ),
    );
    const config = await writeRouterConfig({
      cluster: { sharedState: { redis: redis.url, prefix: `t${Date.now()}` } },
      models: [{
        name: MODEL,
        tokenizer: { mode: "none" },
        kv: {
          store: "mooncake",
          url: master.url,
          chunkSize: 256,
          minPromptTokens: 0,
          timeoutMs: 500,
        },
        policy: "cache_aware",
        health: { intervalMs: 60_000, timeoutMs: 500 },
        instances: engines.map((e, i) => ({ id: e.id, url: e.url, kvHost: `10.0.0.${i + 1}` })),
      }],
    });
    const replicas: RouterProcess[] = [];
    try {
      replicas.push(
        ...await Promise.all(
          [config.path, config.path, config.path].map((path) => startRouterProcess(path)),
        ),
      );
      // Every replica hears the others before the burst starts.
      await send(replicas[0], range(5_000_000, 300));
      for (const replica of replicas.slice(1)) {
        await eventually(
          async () => await metric(replica, "tidegate_shared_state_batches_received") > 0,
          15_000,
          "a replica hearing the others",
        );
      }

      // A burst on a new 8k prefix, round-robin: one router would send all of it to one instance.
      const prefix = range(1_000_000, 8_192);
      const landed = [];
      for (let i = 0; i < 30; i++) {
        landed.push(await send(replicas[i % 3], [...prefix, 7_000_000 + i]));
      }
      assertEquals(new Set(landed).size, 1, `landed on ${landed.join(",")}`);

      // Requests in flight through all three: every replica counts all of them.
      const slow = range(0, 9).map((i) =>
        send(replicas[i % 3], range(2_000_000 + i * 10_000, 1_000), 2_000)
      );
      const inflight = async (r: RouterProcess) =>
        await metric(r, "tidegate_instance_inflight_prefill_requests") +
        await metric(r, "tidegate_instance_inflight_decode_requests");
      let views: number[] = [];
      await eventually(
        async () => (views = await Promise.all(replicas.map(inflight))).every((v) => v >= 8),
        15_000,
        () => `replicas' in-flight views to reach 9±1 (last ${views})`,
      );
      assert(Math.max(...views) - Math.min(...views) <= 1, `views ${views}`);
      await Promise.all(slow);

      // Redis dies mid-run: no request fails; each replica keeps serving on its own view.
      const during = [];
      for (let i = 0; i < 12; i++) {
        if (i === 4) await redis.stop();
        during.push(await send(replicas[i % 3], range(3_000_000 + i * 10_000, 2_000)));
      }
      assertEquals(during.length, 12);
      await eventually(
        () => replicas.some((r) => r.log.some((l) => l.includes("shared state unavailable"))),
        5_000,
        "the outage logged",
      );
    } finally {
      await Promise.all(replicas.map((r) => r.stop()));
      await redis.stop();
      await Promise.all([...engines.map((e) => e.close()), master.close()]);
      await config.remove();
    }
  },
});

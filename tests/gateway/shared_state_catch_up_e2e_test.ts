/**
 * A request that ends while Redis is down: its end never reaches the other replicas. When Redis
 * comes back (same port), they catch up and their load view of the instance agrees again.
 * Two `cli/main.ts start` replicas, a real redis-server stopped and restarted by the test.
 */
import { assertEquals } from "../assert.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { redisServerMissing, startRedisServer } from "../support/redis_server.ts";
import { testNeeding } from "../support/needs_tool.ts";
import { eventually } from "../support/eventually.ts";
import { completion, loadOnlyModel, range } from "../support/harness.ts";
import {
  type RouterProcess,
  startRouterProcess,
  writeRouterConfig,
} from "../support/router_process.ts";

const MODEL = "catch-up-model";

/** Sum of the /metrics samples of one replica whose line matches `line`. */
async function metric(router: RouterProcess, line: (text: string) => boolean): Promise<number> {
  const text = await (await fetch(`${router.url}/metrics`)).text();
  return text.split("\n").filter(line)
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
}

/** Requests in flight on instance `e0` in one replica's own view (prefilling plus decoding). */
function inflightOnE0(router: RouterProcess): Promise<number> {
  return metric(
    router,
    (l) => /^tidegate_instance_inflight_(prefill|decode)_requests\{/.test(l) && l.includes('"e0"'),
  );
}

/** Waits until `router` counts `want` requests in flight on e0 (failing with what it counted). */
async function inflightOnE0ToBe(
  router: RouterProcess,
  want: number,
  timeoutMs: number,
  what: string,
): Promise<void> {
  let counted: number | undefined;
  await eventually(
    async () => (counted = await inflightOnE0(router)) === want,
    timeoutMs,
    () => `${what}: ${want} in flight on e0 (counted ${counted})`,
  );
}

testNeeding(await redisServerMissing(), {
  name:
    "a request that ends while Redis is down leaves the other replica's view once Redis returns",
  fn: async () => {
    const redis = await startRedisServer();
    // Decodes slowly enough that the request is still streaming when Redis goes down.
    const engine = startFakeEngine({
      id: "e0",
      model: MODEL,
      timeScale: 1,
      decodeSecondsPerToken: 0.01,
    });
    const config = await writeRouterConfig({
      cluster: { sharedState: { redis: redis.url, prefix: `c${Date.now()}` } },
      models: [loadOnlyModel(MODEL, { instances: [{ id: "e0", url: engine.url }] })],
    });
    const replicas: RouterProcess[] = [];
    try {
      replicas.push(
        ...await Promise.all([config.path, config.path].map((path) => startRouterProcess(path))),
      );
      const [a, b] = replicas;
      const response = await completion(a.url, {
        model: MODEL,
        prompt: range(0, 200),
        max_tokens: 5_000,
        stream: true,
      });
      assertEquals(response.status, 200);
      const reader = response.body!.getReader();
      await reader.read(); // the first token: the request decodes on e0
      await inflightOnE0ToBe(b, 1, 15_000, "b hears of a's request");

      await redis.stop();
      await reader.cancel(); // the request ends on a; its end cannot be published
      await inflightOnE0ToBe(a, 0, 10_000, "a ends its request");
      await redis.restart();

      await inflightOnE0ToBe(b, 0, 15_000, "b's view of e0 after Redis returned");
      const repaired = await metric(
        b,
        (l) => l.startsWith("tidegate_shared_state_lost_ends_repaired"),
      );
      assertEquals(repaired, 1, "b counts the one end it never heard");
    } finally {
      await Promise.all(replicas.map((r) => r.stop()));
      await redis.stop();
      await engine.close();
      await config.remove();
    }
  },
});

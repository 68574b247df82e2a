/**
 * Two router replicas sharing state through a real redis-server (cluster.sharedState): a
 * Responses API response relayed by one is found by the other, so a follow-up, a retrieval or a
 * cancel reaching either goes to the engine that stored it (src/cluster/response_homes.ts).
 */
import { assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { createRouter } from "../../routes/app.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { redisServerMissing, startRedisServer } from "../support/redis_server.ts";
import { testNeeding } from "../support/needs_tool.ts";
import { eventually } from "../support/eventually.ts";

const MODEL = "homes-model";

function post(url: string, body: unknown): Promise<Response> {
  return fetch(`${url}/v1/responses`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

testNeeding(await redisServerMissing(), {
  name: "a response stored through one replica is continued and retrieved through another",
  fn: async () => {
    const redis = await startRedisServer();
    const engines = ["e0", "e1", "e2"].map((id) =>
      startFakeEngine({ id, model: MODEL, timeScale: 0.001, decodeSecondsPerToken: 0.001 })
    );
    const config = resolveConfig({
      cluster: { sharedState: { redis: redis.url, prefix: `homes${Date.now()}` } },
      models: [{
        name: MODEL,
        tokenizer: { mode: "none" },
        kv: { store: "none" },
        policy: "round_robin",
        instances: engines.map((e) => ({ id: e.id, url: e.url })),
      }],
    });
    const routers = [
      await createRouter(config, { background: false, log: () => {} }),
      await createRouter(config, { background: false, log: () => {} }),
    ];
    try {
      const [a, b] = await Promise.all(
        routers.map(async (r) => `http://127.0.0.1:${(await r.serve({ port: 0 })).port}`),
      );
      const opening = { model: MODEL, input: "Open the gate?", max_output_tokens: 2 };
      // The replicas subscribe in the background: repeat the opening until b has heard of one.
      let id = "";
      let home = "";
      await eventually(
        async () => {
          const first = await post(a, opening);
          const answer = await first.json();
          assertEquals(first.status, 200, JSON.stringify(answer));
          [id, home] = [answer.id, first.headers.get("x-tidegate-instance")!];
          const got = await fetch(`${b}/v1/responses/${id}`);
          await got.body?.cancel();
          return got.status === 200;
        },
        10_000,
        "b finds a response a relayed",
      );
      const got = await fetch(`${b}/v1/responses/${id}`);
      assertEquals(got.headers.get("x-tidegate-instance"), home);
      assertEquals((await got.json()).id, id);
      // Round robin would move it: only the shared home keeps the follow-up on its engine.
      for (let turn = 0; turn < 3; turn++) {
        const next = await post(b, { ...opening, previous_response_id: id, input: `Turn ${turn}` });
        assertEquals(next.status, 200, await next.text());
        assertEquals(next.headers.get("x-tidegate-instance"), home);
      }
      // And the other way round: b's own response is found by a.
      const fromB = await (await post(b, opening)).json();
      await eventually(
        async () => {
          const found = await fetch(`${a}/v1/responses/${fromB.id}`);
          await found.body?.cancel();
          return found.status === 200;
        },
        5_000,
        "a finds a response b relayed",
      );
    } finally {
      await Promise.all(routers.map((r) => r.close()));
      await Promise.all(engines.map((e) => e.close()));
      await redis.stop();
    }
  },
});

/**
 * A replica whose Redis is down at start-up serves on its own view at once, and stops cleanly:
 * start-up and shutdown never wait on the shared-state channel.
 */
import { assertEquals } from "../assert.ts";
import { createRouter } from "../../routes/app.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { completion, loadOnlyModel } from "../support/harness.ts";
import { within } from "../support/within.ts";

Deno.test("a replica starts, serves and stops while its shared-state Redis is down", async () => {
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (closed.addr as Deno.NetAddr).port;
  closed.close(); // nothing listens there: Redis is down
  const engine = startFakeEngine({ id: "e0", model: "m" });
  try {
    const config = resolveConfig({
      listen: { port: 0 },
      cluster: { sharedState: { redis: `redis://127.0.0.1:${port}` } },
      models: [loadOnlyModel("m", { instances: [{ id: "e0", url: engine.url }] })],
    });
    const logs: string[] = [];
    const router = await within(
      5_000,
      "start-up",
      createRouter(config, {
        background: false,
        log: (message) => logs.push(message),
      }),
    );
    try {
      const { port: served } = await router.serve({ port: 0 });
      const response = await completion(`http://127.0.0.1:${served}`, { model: "m", prompt: "hi" });
      assertEquals(response.status, 200);
      await response.text();
    } finally {
      await within(5_000, "shutdown", router.close());
    }
  } finally {
    await engine.close();
  }
});

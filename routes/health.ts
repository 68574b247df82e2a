import { Hono } from "hono";
import type { Gateway } from "../src/gateway/gateway.ts";

/** `/healthz`: the process answers. `/readyz`: every model has at least one healthy instance. */
export function healthRoutes(gateway: Gateway): Hono {
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", (c) => {
    const models = gateway.runtimes().map((runtime) => {
      const healthy = runtime.cluster.entries().filter((e) => runtime.cluster.isHealthy(e));
      return { model: runtime.config.name, healthyInstances: healthy.map((e) => e.config.id) };
    });
    const ready = models.every((m) => m.healthyInstances.length > 0);
    return c.json({ status: ready ? "ready" : "not_ready", models }, ready ? 200 : 503);
  });
  return app;
}

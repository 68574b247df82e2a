import { Hono } from "hono";
import type { ShutdownState } from "../src/gateway/shutdown_state.ts";
import type { ModelRegistry } from "../src/runtime/model_registry.ts";

/**
 * `/healthz`: the process answers. `/readyz`: every model can serve a request: a healthy instance,
 * or for a disaggregated model a healthy neutral one or a healthy prefill and decode pair; never
 * while the router drains for shutdown.
 */
export function healthRoutes(
  registry: ModelRegistry,
  shutdown: Pick<ShutdownState, "draining">,
): Hono {
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", (c) => {
    // Shutting down: fail readiness first so load balancers stop sending (cli/start.ts).
    if (shutdown.draining) return c.json({ status: "draining", models: [] }, 503);
    const models = registry.runtimes().map((runtime) => {
      const healthy = runtime.cluster.entries().filter((e) => runtime.cluster.isHealthy(e));
      const roles = new Set(healthy.map((e) => e.config.role));
      const serves = roles.has("neutral") || (roles.has("prefill") && roles.has("decode"));
      return {
        model: runtime.config.name,
        ready: serves,
        healthyInstances: healthy.map((e) => e.config.id),
      };
    });
    const ready = models.every((m) => m.ready);
    return c.json({ status: ready ? "ready" : "not_ready", models }, ready ? 200 : 503);
  });
  return app;
}

import { Hono } from "hono";
import type { GatewayMetrics } from "../src/telemetry/metrics.ts";

/** Prometheus text exposition of every tidegate series. */
export function metricsRoutes(metrics: GatewayMetrics): Hono {
  const app = new Hono();
  app.get("/metrics", async (c) => {
    return c.body(await metrics.text(), 200, { "content-type": metrics.contentType });
  });
  return app;
}

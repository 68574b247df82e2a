import { type Context, Hono, type MiddlewareHandler } from "hono";
import {
  dashboardCss,
  dashboardHtml,
  dashboardJs,
  dashboardViewJs,
} from "../src/dashboard/assets.ts";
import { adminAuth } from "../src/admin/auth.ts";
import { dashboardAuth } from "../src/dashboard/dashboard_auth.ts";
import type { LiveExperiment } from "../src/experiment/experiment_arms.ts";
import type { ModelRegistry } from "../src/runtime/model_registry.ts";
import {
  assembleDashboardData,
  type DashboardModelInput,
  type DashboardSources,
  readDashboardInput,
} from "../src/telemetry/dashboard_data.ts";
import type { DashboardTraffic } from "../src/telemetry/dashboard_traffic.ts";
import type { DecisionEntry } from "../src/telemetry/decision_log.ts";
import type { TtftTimeline } from "../src/telemetry/ttft_timeline.ts";

export interface DashboardRouteOptions {
  /** The router's decision log. */
  decisions: { recent(limit: number): DecisionEntry[] };
  /** Per-instance traffic totals and the TTFT timeline, observers the gateway was given. */
  traffic: DashboardTraffic;
  timeline: TtftTimeline;
  /** Requests waiting in each model's flow-control queue, per band (the gateway's). */
  queueLengths?: () => ReadonlyMap<string, ReadonlyMap<number, number>>;
  /** The live A/B arms per model (the page's header shows them instead of the one policy). */
  arms?: { get(model: string): LiveExperiment | undefined };
  /** Wall-clock ms (default Date.now) and monotonic ms (default performance.now). */
  wallNow?: () => number;
  now?: () => number;
  /** The admin rule (default: src/admin/auth.ts with the config's `admin.token`). */
  // deno-lint-ignore no-explicit-any
  adminAuth?: MiddlewareHandler<any>;
}

/** Most decisions one `/dashboard/data` answer carries (`?decisions=N`, default 20). */
const MAX_DECISIONS = 200;

/**
 * A browser page shows operational data only: no framing, no scripts or styles but our own,
 * no fetches elsewhere, no referrer (the URL may carry `?token=`).
 */
const PAGE_HEADERS = {
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; " +
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; " +
    "frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
};

/**
 * `GET /dashboard` (the page), its script, module and style sheet, and `/dashboard/data`
 * (the JSON the page polls every second: polling rather than SSE, so no stream outlives a
 * request or holds up a graceful shutdown).
 */
export function dashboardRoutes(models: ModelRegistry, options: DashboardRouteOptions): Hono {
  const sources: DashboardSources = {
    models: () => dashboardModels(models, options.arms, options.queueLengths?.()),
    traffic: options.traffic,
    timeline: options.timeline,
    decisions: options.decisions,
    wallNow: options.wallNow ?? (() => Date.now()),
    now: options.now ?? (() => performance.now()),
  };

  const app = new Hono();
  const token = () => models.config.admin.token;
  const guard = dashboardAuth({ token, adminAuth: options.adminAuth ?? adminAuth({ token }) });
  app.use("/dashboard", guard);
  app.use("/dashboard/*", guard);
  app.get(
    "/dashboard",
    (c) =>
      c.body(dashboardHtml, 200, { ...PAGE_HEADERS, "content-type": "text/html; charset=utf-8" }),
  );
  // The page's relative URLs need the path without a trailing slash.
  app.get("/dashboard/", (c) => c.redirect("../dashboard", 308));
  const script = (source: string) => (c: Context) =>
    c.body(source, 200, { ...PAGE_HEADERS, "content-type": "text/javascript; charset=utf-8" });
  app.get("/dashboard/app.js", script(dashboardJs));
  app.get("/dashboard/dashboard_view.js", script(dashboardViewJs));
  app.get(
    "/dashboard/app.css",
    (c) =>
      c.body(dashboardCss, 200, { ...PAGE_HEADERS, "content-type": "text/css; charset=utf-8" }),
  );
  app.get("/dashboard/data", (c) => {
    const asked = Number(c.req.query("decisions") ?? 20);
    const limit = Number.isFinite(asked)
      ? Math.min(MAX_DECISIONS, Math.max(0, Math.floor(asked)))
      : 20;
    const data = assembleDashboardData(readDashboardInput(sources, limit));
    return c.json(data, 200, PAGE_HEADERS);
  });
  return app;
}

/** Every served model's live state, as the dashboard shows it. */
function dashboardModels(
  models: ModelRegistry,
  arms: DashboardRouteOptions["arms"],
  queues: ReadonlyMap<string, ReadonlyMap<number, number>> | undefined,
): DashboardModelInput[] {
  return models.runtimes().map((runtime) => {
    const instances = runtime.cluster.status();
    return {
      name: runtime.config.name,
      experiment: experimentOf(arms?.get(runtime.config.name)),
      policy: runtime.defaultPolicy.name,
      tokenizer: runtime.config.tokenizer.mode,
      instances,
      store: runtime.store
        ? { url: runtime.store.url, health: runtime.store.health.snapshot() }
        : undefined,
      predictedIndexKeys: runtime.predicted?.size ?? 0,
      queue: queues?.get(runtime.config.name),
      kvAgreement: Object.fromEntries(
        instances.map((s) => [s.id, runtime.agreement.snapshot(s.id)]),
      ),
    };
  });
}

function experimentOf(live: LiveExperiment | undefined): DashboardModelInput["experiment"] {
  if (!live) return undefined;
  return {
    version: live.version,
    key: live.config.key,
    arms: live.arms.map((a) => ({ name: a.name, policy: a.policy.name, weight: a.weight })),
  };
}

import type { TracerProvider } from "@opentelemetry/api";
import { Hono } from "hono";
import { adminRoutes } from "../../routes/admin.ts";
import { experimentRoutes } from "../../routes/experiments.ts";
import { dashboardRoutes } from "../../routes/dashboard.ts";
import { healthRoutes } from "../../routes/health.ts";
import { metricsRoutes } from "../../routes/metrics.ts";
import { openaiRoutes } from "../../routes/openai.ts";
import { adminAuth } from "../admin/auth.ts";
import type { ResolveDns } from "../cluster/dns_discovery.ts";
import { ConfigError } from "../config/load.ts";
import type { Config } from "../config/schema.ts";
import type { Timers } from "../cluster/timers.ts";
import { ExperimentArms, experimentProblems } from "../experiment/experiment_arms.ts";
import { ExperimentStats } from "../experiment/experiment_stats.ts";
import { openAIError } from "../openai/errors.ts";
import {
  GatewayMetrics,
  type InstanceGaugeSample,
  type ModelGaugeSample,
} from "../telemetry/metrics.ts";
import { DecisionLog } from "../telemetry/decision_log.ts";
import { metricsObserver } from "../telemetry/metrics_observer.ts";
import { RequestTracing } from "../telemetry/tracing.ts";
import type { LoadedTokenizer } from "../tokenize/local_tokenizer.ts";
import { BackgroundWork } from "./background_work.ts";
import { Gateway } from "./gateway.ts";
import { applyReload, type ReloadResult } from "./reload.ts";
import { ModelRuntime, policyProblems } from "./model_runtime.ts";

export interface RouterOptions {
  fetch?: typeof fetch;
  /** Monotonic milliseconds (default performance.now). */
  now?: () => number;
  wallNow?: () => number;
  random?: () => number;
  timers?: Timers;
  /** Structured log sink (default: one JSON line per event on stderr). */
  log?: (message: string, fields?: Record<string, unknown>) => void;
  /** Start health probes, load polling and DNS discovery (default true). */
  background?: boolean;
  /** DNS resolver of discovery entries (default `Deno.resolveDns`). */
  resolveDns?: ResolveDns;
  /** Where spans go (default: the global provider, i.e. Deno's exporter under OTEL_DENO=true). */
  tracerProvider?: TracerProvider;
}

export interface Router {
  readonly config: Config;
  readonly gateway: Gateway;
  readonly metrics: GatewayMetrics;
  /** The most recent dispatch decisions with every candidate's terms. */
  readonly decisions: DecisionLog;
  /** A/B experiments: live arms per model (change them with `arms.apply`) and their stats. */
  readonly experiments: { arms: ExperimentArms; stats: ExperimentStats };
  readonly app: Hono;
  /** The HTTP handler (for `Deno.serve` or `app.request`). */
  fetch(request: Request): Promise<Response>;
  /** Serves on the configured address; resolves with the bound address once listening. */
  serve(
    overrides?: { hostname?: string; port?: number; signal?: AbortSignal },
  ): Promise<{ hostname: string; port: number; finished: Promise<void> }>;
  /**
   * Applies a new validated config without dropping requests (src/gateway/reload.ts); an
   * invalid one is rejected with the reasons and the running config kept. Calls are serialized.
   */
  reload(config: Config): Promise<ReloadResult>;
  /** Stops background work and the server (in-flight requests finish first). */
  close(): Promise<void>;
}

export function jsonLog(message: string, fields: Record<string, unknown> = {}): void {
  console.error(JSON.stringify({ time: new Date().toISOString(), msg: message, ...fields }));
}

/** Builds runtimes for every model of `config`, reusing already loaded tokenizers. */
export async function buildRuntimes(
  config: Config,
  deps: ConstructorParameters<typeof Gateway>[2] & { timers?: Timers },
  tokenizerCache: Map<string, Promise<LoadedTokenizer>>,
): Promise<Map<string, ModelRuntime>> {
  const problems = [...policyProblems(config), ...experimentProblems(config)];
  if (problems.length) throw new ConfigError(problems);
  const runtimes = new Map<string, ModelRuntime>();
  const built = await Promise.allSettled(
    config.models.map((model) => ModelRuntime.create(model, { ...deps, tokenizerCache })),
  );
  const errors: string[] = [];
  built.forEach((result, m) => {
    if (result.status === "fulfilled") runtimes.set(config.models[m].name, result.value);
    else {errors.push(
        `models[${m}] (${config.models[m].name}): ${(result.reason as Error).message}`,
      );}
  });
  if (errors.length) throw new ConfigError(errors);
  return runtimes;
}

/**
 * Builds the router from a validated config: one runtime per model, the gateway, metrics and
 * the HTTP app. Nothing listens until `serve()`.
 */
export async function createRouter(config: Config, options: RouterOptions = {}): Promise<Router> {
  const deps = {
    fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
    now: options.now ?? (() => performance.now()),
    wallNow: options.wallNow ?? (() => Date.now()),
    random: options.random ?? Math.random,
    log: options.log ?? jsonLog,
    timers: options.timers,
  };
  const tokenizerCache = new Map<string, Promise<LoadedTokenizer>>();
  const runtimes = await buildRuntimes(config, deps, tokenizerCache);
  const gateway = new Gateway(config, runtimes, deps);
  const epochOffsetMs = deps.wallNow() - deps.now();
  gateway.tracing = new RequestTracing({
    tracerProvider: options.tracerProvider,
    denoInstrumented: Deno.env.get("OTEL_DENO") === "true",
    toEpochMs: (ms) => ms + epochOffsetMs,
  });

  const metrics = new GatewayMetrics(
    () => instanceSamples(gateway, deps.now),
    () => modelSamples(gateway),
  );
  gateway.observers.push(metricsObserver(metrics));
  const arms = new ExperimentArms({
    random: deps.random,
    wallNow: deps.wallNow,
    log: deps.log,
    adminToken: () => gateway.config.admin.token,
    onChange: (model) => metrics.armChanges.inc({ model }),
  });
  gateway.arms = arms;
  arms.sync(gateway.runtimes(), config);
  const experimentStats = new ExperimentStats(arms);
  gateway.observers.push(experimentStats);
  const decisions = new DecisionLog();
  gateway.observers.push(decisions);

  const app = new Hono();
  // Every /admin route, whoever adds it, sits behind the admin token (or loopback) check.
  const adminGuard = adminAuth({ token: () => gateway.config.admin.token });
  app.use("/admin", adminGuard);
  app.use("/admin/*", adminGuard);
  app.route("/admin", adminRoutes(gateway, { log: deps.log }));
  app.route("/admin", experimentRoutes(gateway, { arms, stats: experimentStats }));
  app.route("/", healthRoutes(gateway));
  app.route("/", metricsRoutes(metrics));
  app.route("/", openaiRoutes(gateway, { maxBodyBytes: config.limits.maxBodyBytes }));
  app.route("/", dashboardRoutes(gateway, { decisions, wallNow: deps.wallNow, now: deps.now }));
  app.notFound((c) =>
    openAIError(404, `No route for ${c.req.method} ${new URL(c.req.url).pathname}`, {
      code: "not_found",
    })
  );
  app.onError((error) => {
    deps.log("unhandled error in a route", { error: error.stack ?? String(error) });
    return openAIError(500, `Internal router error: ${error.message}`, { code: "internal_error" });
  });

  const background = new BackgroundWork({
    enabled: options.background ?? true,
    resolveDns: options.resolveDns,
    now: deps.now,
    timers: deps.timers,
    log: deps.log,
  });
  for (const runtime of runtimes.values()) background.start(runtime);
  let reloading: Promise<unknown> = Promise.resolve();

  let server: Deno.HttpServer | undefined;
  const router: Router = {
    get config() {
      return gateway.config;
    },
    gateway,
    metrics,
    decisions,
    experiments: { arms, stats: experimentStats },
    app,
    fetch: (request) => Promise.resolve(app.fetch(request)),
    serve(overrides = {}) {
      // Deno.serve binds synchronously (throwing AddrInUse at once) and reports the bound port.
      const started = Deno.serve({
        hostname: overrides.hostname ?? gateway.config.listen.host,
        port: overrides.port ?? gateway.config.listen.port,
        signal: overrides.signal,
        onListen: () => {},
        onError: (error) => {
          deps.log("http server error", { error: (error as Error)?.stack ?? String(error) });
          return openAIError(500, "Internal router error", { code: "internal_error" });
        },
      }, (request, info) => app.fetch(request, info));
      server = started;
      const { hostname, port } = started.addr as Deno.NetAddr;
      return Promise.resolve({ hostname, port, finished: started.finished });
    },
    reload(next) {
      const done = reloading.then(() =>
        applyReload({
          gateway,
          background,
          buildRuntime: (model) => ModelRuntime.create(model, { ...deps, tokenizerCache }),
          validate: experimentProblems,
          log: deps.log,
        }, next)
      ).then((result) => {
        metrics.reloads.inc({ outcome: result.ok ? "applied" : "rejected" });
        // Gateway.replace() already synced; the config is passed so that a kept runtime (built
        // from the old config) never brings back an old experiment section.
        if (result.ok) arms.sync(gateway.runtimes(), gateway.config);
        return result;
      });
      reloading = done.catch(() => {});
      return done;
    },
    async close() {
      await reloading;
      await Promise.all(gateway.runtimes().map((r) => background.stop(r)));
      if (server) await server.shutdown();
    },
  };
  return router;
}

function instanceSamples(gateway: Gateway, now: () => number): InstanceGaugeSample[] {
  return gateway.runtimes().flatMap((runtime) =>
    runtime.cluster.status().map((status) => {
      const local = runtime.cluster.account.load(status.id);
      const report = status.engineReport?.report;
      return {
        model: runtime.config.name,
        instance: status.id,
        healthy: status.healthy,
        breakerState: status.breaker,
        draining: status.draining,
        inflightPrefillTokens: local.prefillTokens,
        inflightPrefillRequests: local.prefillRequests,
        inflightDecodeRequests: local.decodeRequests,
        estimatedWaitingPrefillTokens: status.load.waitingPrefillTokens,
        reportedWaitingRequests: report?.waitingRequests,
        reportedRunningRequests: report?.runningRequests,
        reportedPendingTokens: report?.pendingPrefillTokens,
        reportAgeSeconds: report ? (now() - report.observedAtMs) / 1000 : undefined,
        reportStale: status.engineReport ? !status.engineReport.usable : undefined,
        probeFailures: status.probeFailures,
      };
    })
  );
}

function modelSamples(gateway: Gateway): ModelGaugeSample[] {
  return gateway.runtimes().map((runtime) => ({
    model: runtime.config.name,
    storeDown: runtime.store ? runtime.store.health.state !== "up" : false,
    expiredLeases: runtime.cluster.account.expiredTotal,
    predictedIndexKeys: runtime.predicted?.size ?? 0,
  }));
}

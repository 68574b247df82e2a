import type { TracerProvider } from "@opentelemetry/api";
import { Hono } from "hono";
import { healthRoutes } from "../../routes/health.ts";
import { metricsRoutes } from "../../routes/metrics.ts";
import { openaiRoutes } from "../../routes/openai.ts";
import { ConfigError } from "../config/load.ts";
import type { Config } from "../config/schema.ts";
import type { Timers } from "../cluster/timers.ts";
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
import { Gateway } from "./gateway.ts";
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
  /** Start health probes and load polling (default true). */
  background?: boolean;
  /** Where spans go (default: the global provider, i.e. Deno's exporter under OTEL_DENO=true). */
  tracerProvider?: TracerProvider;
}

export interface Router {
  readonly config: Config;
  readonly gateway: Gateway;
  readonly metrics: GatewayMetrics;
  /** The most recent dispatch decisions with every candidate's terms. */
  readonly decisions: DecisionLog;
  readonly app: Hono;
  /** The HTTP handler (for `Deno.serve` or `app.request`). */
  fetch(request: Request): Promise<Response>;
  /** Serves on the configured address; resolves with the bound address once listening. */
  serve(
    overrides?: { hostname?: string; port?: number; signal?: AbortSignal },
  ): Promise<{ hostname: string; port: number; finished: Promise<void> }>;
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
  const problems = policyProblems(config);
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
  const decisions = new DecisionLog();
  gateway.observers.push(decisions);

  const app = new Hono();
  app.route("/", healthRoutes(gateway));
  app.route("/", metricsRoutes(metrics));
  app.route("/", openaiRoutes(gateway, { maxBodyBytes: config.limits.maxBodyBytes }));
  app.notFound((c) =>
    openAIError(404, `No route for ${c.req.method} ${new URL(c.req.url).pathname}`, {
      code: "not_found",
    })
  );
  app.onError((error) => {
    deps.log("unhandled error in a route", { error: error.stack ?? String(error) });
    return openAIError(500, `Internal router error: ${error.message}`, { code: "internal_error" });
  });

  if (options.background ?? true) {
    for (const runtime of runtimes.values()) {
      runtime.cluster.start();
    }
  }

  let server: Deno.HttpServer | undefined;
  const router: Router = {
    get config() {
      return gateway.config;
    },
    gateway,
    metrics,
    decisions,
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
      }, (request) => app.fetch(request));
      server = started;
      const { hostname, port } = started.addr as Deno.NetAddr;
      return Promise.resolve({ hostname, port, finished: started.finished });
    },
    async close() {
      await Promise.all(gateway.runtimes().map((r) => r.cluster.stop()));
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
    storeDown: runtime.storeHealth ? runtime.storeHealth.state !== "up" : false,
    expiredLeases: runtime.cluster.account.expiredTotal,
    predictedIndexKeys: runtime.predicted?.size ?? 0,
  }));
}

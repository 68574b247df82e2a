/**
 * The composition root: builds every collaborator of the router from a validated config, hands
 * them to the gateway and the routes at construction, and mounts the routes on one Hono app.
 * Nothing under src/ imports this folder (docs/architecture.md).
 */
import process from "node:process";
import type { TracerProvider } from "@opentelemetry/api";
import { Hono } from "hono";
import { adminAuth } from "../src/admin/auth.ts";
import type { ResolveDns } from "../src/cluster/dns_discovery.ts";
import { discoveryHostFilter } from "../src/runtime/instance_host_policy.ts";
import { systemTimers, type Timers } from "../src/cluster/timers.ts";
import { isResolvedConfig, resolveConfig } from "../src/config/load.ts";
import type { Config } from "../src/config/schema.ts";
import type { RequestObserver } from "../src/contracts.ts";
import { ExperimentArms, experimentProblems } from "../src/experiment/experiment_arms.ts";
import { ExperimentStats } from "../src/experiment/experiment_observer.ts";
import { BackgroundWork } from "../src/runtime/background_work.ts";
import { buildRuntimes } from "../src/runtime/build_runtimes.ts";
import { Gateway, type GatewayDeps } from "../src/gateway/gateway.ts";
import { ModelRegistry } from "../src/runtime/model_registry.ts";
import { instanceSamples, modelSamples } from "../src/runtime/gauge_samples.ts";
import { ModelRuntime } from "../src/runtime/model_runtime.ts";
import { applyReload, type ReloadResult } from "../src/runtime/reload.ts";
import { StoreShapeChecks } from "../src/diagnostics/store_shape_check.ts";
import { HttpError, openAIError } from "../src/openai/errors.ts";
import { accessLogObserver } from "../src/telemetry/access_log.ts";
import type { KvEventSockets } from "../src/runtime/engine_event_feed.ts";
import { DashboardTraffic } from "../src/telemetry/dashboard_traffic.ts";
import { DecisionLog } from "../src/telemetry/decision_log.ts";
import { jsonLog } from "../src/telemetry/json_log.ts";
import { GatewayMetrics } from "../src/telemetry/metrics.ts";
import { metricsObserver } from "../src/telemetry/metrics_observer.ts";
import { RequestTracing } from "../src/telemetry/tracing.ts";
import { TtftTimeline } from "../src/telemetry/ttft_timeline.ts";
import { TokenizerPools } from "../src/tokenize/tokenizer_pools.ts";
import { createSharedState } from "../src/cluster/shared_state_setup.ts";
import type { SharedState } from "../src/cluster/shared_state.ts";
import { ResponseHomes } from "../src/cluster/response_homes.ts";
import type { LoadedTokenizer } from "../src/tokenize/local_tokenizer.ts";
import { adminRoutes } from "./admin.ts";
import { adminAdapterRoutes } from "./admin_adapters.ts";
import { dashboardRoutes } from "./dashboard.ts";
import { experimentRoutes } from "./experiments.ts";
import { healthRoutes } from "./health.ts";
import { kvDetectRoutes } from "./kv_detect_routes.ts";
import { metricsRoutes } from "./metrics.ts";
import { openaiRoutes } from "./openai.ts";
import { type DrainOptions, type DrainOutcome, drainServer } from "./graceful_shutdown.ts";
import { listen, type Listening } from "./listener.ts";
import { requestIds } from "./request_id.ts";
import { RequestWorkerPool } from "../src/gateway/request_worker_pool.ts";
import { EventLoopLag } from "../src/telemetry/event_loop_lag.ts";
import { type KeepAliveGet, keepAliveGet } from "../src/kv/keep_alive_get.ts";

export interface RouterOptions {
  fetch?: typeof fetch;
  /**
   * The store lookups' HTTP client (default: `fetch` when given, else kept-alive connections of
   * src/kv/keep_alive_get.ts).
   */
  masterFetch?: typeof fetch;
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
  /** More observers of finished requests, told after the router's own. */
  observers?: readonly RequestObserver[];
  /**
   * Read a sample of each store's keys at start and warn when the configured layout is absent
   * (src/diagnostics/store_shape_check.ts); in the background, bounded. Default: as `background`.
   */
  storeShapeCheck?: boolean | { timeoutMs?: number; maxBytes?: number };
  /** The config file this router runs from (`start`), named in the commands its logs suggest. */
  configPath?: string;
  /** Where a raw config's `env:NAME` values are read from (default `Deno.env`). */
  env?: (name: string) => string | undefined;
  /** The sockets of the engines' KV event feeds (default: ZMTP over TCP or Unix sockets, src/runtime/kv_event_sockets.ts). */
  kvEventSockets?: () => KvEventSockets;
}

/** A config as written in a file (e.g. `JSON.parse`d), not yet validated. */
export type RawConfig = { readonly [section: string]: unknown };

export interface Router {
  readonly config: Config;
  readonly gateway: Gateway;
  /** The running config and one runtime per model, by name, alias or LoRA name. */
  readonly registry: ModelRegistry;
  readonly metrics: GatewayMetrics;
  /** The most recent dispatch decisions with every candidate's terms. */
  readonly decisions: DecisionLog;
  /** A/B experiments: live arms per model (change them with `arms.apply`) and their stats. */
  readonly experiments: { arms: ExperimentArms; stats: ExperimentStats };
  readonly app: Hono;
  /** The HTTP handler (for the listener or `app.request`). */
  fetch(request: Request): Promise<Response>;
  /**
   * Resolves once the worker threads have loaded (tokenizers take seconds), or after
   * `timeoutMs`: true when they all did. Until then long prompts wait for a worker and may go by
   * load; `start` and the demo call this before taking traffic.
   */
  warm(timeoutMs?: number): Promise<boolean>;
  /** Serves on the configured address; resolves with the bound address once listening. */
  serve(
    overrides?: { hostname?: string; port?: number; signal?: AbortSignal },
  ): Promise<{ hostname: string; port: number; finished: Promise<void> }>;
  /**
   * Applies a new validated config without dropping requests (src/runtime/reload.ts); an
   * invalid one is rejected with the reasons and the running config kept. Calls are serialized.
   */
  reload(config: Config): Promise<ReloadResult>;
  /**
   * Graceful shutdown's first part (routes/graceful_shutdown.ts): `/readyz` fails, serving goes on
   * for `readyDelayMs`, then the listener closes and in-flight requests get `drainTimeoutMs`
   * before the rest end with an error event. Call `close()` after it.
   */
  drain(options: DrainOptions): Promise<DrainOutcome>;
  /** Stops background work and the server (in-flight requests finish first). */
  close(): Promise<void>;
}

type RouterDeps = GatewayDeps & {
  masterFetch?: typeof fetch;
  /** The store lookups' kept-alive connections, closed with the router. */
  masterConnections?: KeepAliveGet;
  timers?: Timers;
  tokenizerCache: Map<string, Promise<LoadedTokenizer>>;
  tokenizerPools: TokenizerPools;
  /** Large bodies and long prompts' keys, off the main loop; none with `workers: 0`. */
  requestWorkers?: RequestWorkerPool;
  shared?: SharedState;
  configPath?: string;
};

/** The router's parts, built once; the routes and the lifecycle share them. */
interface RouterParts {
  gateway: Gateway;
  registry: ModelRegistry;
  metrics: GatewayMetrics;
  decisions: DecisionLog;
  arms: ExperimentArms;
  stats: ExperimentStats;
  traffic: DashboardTraffic;
  timeline: TtftTimeline;
  /** Set once listening: the listener's open client connections, when it counts them. */
  connections: { open?: () => number };
}

/**
 * Builds the router from a config: one runtime per model, the gateway, metrics and the HTTP app.
 * Nothing listens until `serve()`. A config that did not come from `resolveConfig` /
 * `loadConfigFile` (a parsed JSON file, an object literal) is validated by the same loader first:
 * ConfigError lists every problem.
 */
export async function createRouter(
  input: Config | RawConfig,
  options: RouterOptions = {},
): Promise<Router> {
  const config = isResolvedConfig(input) ? input : resolveConfig(input, {
    env: options.env ?? ((name) => Deno.env.get(name)),
  });
  const workers = config.workers ?? navigator.hardwareConcurrency;
  const masterGet = options.fetch || options.masterFetch
    ? undefined
    : keepAliveGet({ fallback: globalThis.fetch.bind(globalThis) });
  const deps: RouterDeps = {
    fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
    masterFetch: options.masterFetch ?? masterGet?.fetch ?? options.fetch,
    masterConnections: masterGet,
    now: options.now ?? (() => performance.now()),
    wallNow: options.wallNow ?? (() => Date.now()),
    random: options.random ?? Math.random,
    log: options.log ?? jsonLog,
    timers: options.timers,
    tokenizerCache: new Map(),
    tokenizerPools: new TokenizerPools({ size: workers, log: options.log ?? jsonLog }),
    configPath: options.configPath,
  };
  const runtimes = await buildRuntimes(config, deps, experimentProblems).catch((error) => {
    deps.tokenizerPools.close(); // workers a model started before another failed
    throw error;
  });
  if (workers > 0) {
    // One: large bodies are rare, and each busy worker takes a core from the main loop.
    deps.requestWorkers = new RequestWorkerPool({ size: 1, timeoutMs: 10_000, log: deps.log });
  }
  // Facts that arrive before the gateway exists find no model: the next ones will.
  const built: { registry?: ModelRegistry } = {};
  const responseHomes = new ResponseHomes();
  const shared = createSharedState(config.cluster.sharedState, {
    viewOf: (model) => {
      const runtime = built.registry?.runtime(model);
      return runtime && {
        account: runtime.cluster.account,
        predicted: runtime.predicted,
        homes: responseHomes,
      };
    },
    now: deps.now,
    timers: deps.timers,
    log: deps.log,
  });
  const parts = buildCollaborators(config, runtimes, { ...deps, shared }, {
    ...options,
    responseHomes,
  });
  built.registry = parts.registry;
  for (const runtime of runtimes.values()) attach(shared, parts.gateway, runtime);
  shared?.attachHomes(responseHomes);
  shared?.start();
  const app = createApp(parts, deps);
  const loopLag = new EventLoopLag({
    now: deps.now,
    timers: deps.timers ?? systemTimers(),
    observe: (lagS) => parts.metrics.eventLoopLag.observe(lagS),
    // Real timers measure the real process; a test's own clock keeps the 20 ms period.
    cpuMs: deps.timers ? undefined : processCpuMs,
  });
  loopLag.start();
  const background = new BackgroundWork({
    enabled: options.background ?? true,
    resolveDns: options.resolveDns,
    now: deps.now,
    timers: deps.timers,
    log: deps.log,
    allowsHost: (host) => discoveryHostFilter(parts.registry.config)?.(host) ?? true,
    kvEventSockets: options.kvEventSockets,
    fetch: deps.fetch,
  });
  for (const runtime of runtimes.values()) background.start(runtime);
  const shapeChecks = new StoreShapeChecks();
  const shapeCheck = options.storeShapeCheck ?? options.background ?? true;
  if (shapeCheck !== false) {
    shapeChecks.start(runtimes.values(), {
      fetch: deps.fetch,
      log: deps.log,
      configPath: options.configPath,
      ...(typeof shapeCheck === "object" ? shapeCheck : {}),
    });
  }
  return routerLifecycle(parts, app, { background, shapeChecks, loopLag }, { ...deps, shared });
}

/** A runtime's leases and predictions shared with other replicas, its prefill ends waking the queue. */
function attach(
  shared: SharedState | undefined,
  gateway: Gateway,
  runtime: ModelRuntime,
): ModelRuntime {
  shared?.attach(runtime.config.name, runtime.cluster.account, runtime.predicted);
  gateway.wakeOnPrefillEnds(runtime);
  return runtime;
}

/** This process's CPU time so far (all its threads), in milliseconds. */
function processCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** Every collaborator, each given what it needs at construction. */
function buildCollaborators(
  config: Config,
  runtimes: Map<string, ModelRuntime>,
  deps: RouterDeps,
  options: RouterOptions & { responseHomes: ResponseHomes },
): RouterParts {
  const registry = new ModelRegistry(config, runtimes, deps.wallNow);
  // The router gauges read `gateway` (declared below) when called, i.e. once it exists.
  const connections: RouterParts["connections"] = {};
  const metrics = new GatewayMetrics(
    () => instanceSamples(registry.runtimes(), deps.now),
    () => modelSamples(registry.runtimes()),
    () => ({
      sharedState: deps.shared?.samples(),
      inFlight: gateway.inFlight,
      queues: gateway.queueLengths(),
      openConnections: connections.open?.(),
    }),
  );
  const arms = new ExperimentArms({
    random: deps.random,
    wallNow: deps.wallNow,
    log: deps.log,
    adminToken: () => registry.config.admin.token,
    onChange: (model) => metrics.armChanges.inc({ model }),
  });
  arms.sync(runtimes.values(), config);
  const stats = new ExperimentStats(arms);
  const decisions = new DecisionLog();
  const traffic = new DashboardTraffic();
  const timeline = new TtftTimeline();
  const epochOffsetMs = deps.wallNow() - deps.now();
  const gateway: Gateway = new Gateway(registry, deps, {
    observers: [
      metricsObserver(metrics),
      accessLogObserver(deps.log),
      stats,
      decisions,
      traffic,
      timeline,
      ...(options.observers ?? []),
    ],
    tracing: new RequestTracing({
      tracerProvider: options.tracerProvider,
      denoInstrumented: Deno.env.get("OTEL_DENO") === "true",
      toEpochMs: (ms) => ms + epochOffsetMs,
    }),
    arms,
    requestWorkers: deps.requestWorkers,
    responseHomes: options.responseHomes,
  });
  return { gateway, registry, metrics, decisions, arms, stats, traffic, timeline, connections };
}

/** Mounts every route; an HttpError thrown anywhere becomes its OpenAI-shaped answer. */
function createApp(parts: RouterParts, deps: RouterDeps): Hono {
  const { gateway, registry } = parts;
  const app = new Hono();
  app.use("*", requestIds());
  // Every /admin route, whoever adds it, sits behind the admin token (or loopback) check.
  const adminGuard = adminAuth({ token: () => registry.config.admin.token });
  app.use("/admin", adminGuard);
  app.use("/admin/*", adminGuard);
  app.route("/admin", adminRoutes(registry, { log: deps.log }));
  app.route("/admin", adminAdapterRoutes(registry, { fetch: deps.fetch, log: deps.log }));
  app.route("/admin", kvDetectRoutes(registry));
  app.route("/admin", experimentRoutes(registry, { arms: parts.arms, stats: parts.stats }));
  app.route("/", healthRoutes(registry, gateway.shutdown));
  app.route("/", metricsRoutes(parts.metrics));
  app.route("/", openaiRoutes(gateway, registry));
  app.route(
    "/",
    dashboardRoutes(registry, {
      ...parts,
      queueLengths: () => gateway.queueLengths(),
      wallNow: deps.wallNow,
      now: deps.now,
    }),
  );
  app.notFound((c) => {
    const path = new URL(c.req.url).pathname;
    return openAIError(404, `No route for ${c.req.method} ${path}`, { code: "not_found" });
  });
  app.onError((error) => {
    if (error instanceof HttpError) return error.toResponse();
    deps.log("unhandled error in a route", { level: "error", error: error.stack ?? String(error) });
    return openAIError(500, `Internal router error: ${error.message}`, { code: "internal_error" });
  });
  return app;
}

/** The router's lifecycle: serve, reload (serialized), close. */
function routerLifecycle(
  parts: RouterParts,
  app: Hono,
  work: { background: BackgroundWork; shapeChecks: StoreShapeChecks; loopLag: EventLoopLag },
  deps: RouterDeps,
): Router {
  const { background, shapeChecks } = work;
  const { gateway, registry, metrics, arms } = parts;
  let reloading: Promise<unknown> = Promise.resolve();
  let listening: Listening | undefined;
  let stopping: Promise<void> | undefined;
  // Once: drain() closes the listener and close() waits on the same shutdown.
  const stopServing = () => stopping ??= listening?.shutdown() ?? Promise.resolve();
  return {
    get config() {
      return registry.config;
    },
    gateway,
    registry,
    metrics,
    decisions: parts.decisions,
    experiments: { arms, stats: parts.stats },
    app,
    fetch: (request) => Promise.resolve(app.fetch(request)),
    async warm(timeoutMs = 60_000) {
      const loaded = await Promise.all([
        deps.tokenizerPools.ready(timeoutMs),
        deps.requestWorkers?.ready(timeoutMs) ?? true,
      ]);
      return loaded.every(Boolean);
    },
    async serve(overrides = {}) {
      listening = await serve(app, registry.config, overrides, deps.log);
      parts.connections.open = listening.openConnections;
      const { hostname, port, finished } = listening;
      return { hostname, port, finished };
    },
    reload(next) {
      const done = reloading.then(() =>
        applyReload({
          models: {
            get config() {
              return registry.config;
            },
            runtimes: () => registry.runtimes(),
            runtime: (model) => registry.runtime(model),
            replace(config, runtimes) {
              registry.replace(config, runtimes);
              gateway.configChanged(config);
            },
          },
          background,
          buildRuntime: async (model) =>
            attach(deps.shared, gateway, await ModelRuntime.create(model, deps)),
          validate: experimentProblems,
          log: deps.log,
        }, next)
      ).then((result) => {
        metrics.reloads.inc({ outcome: result.ok ? "applied" : "rejected" });
        // The config is passed so that a kept runtime (built from the old config) never brings
        // back an old experiment section.
        if (result.ok) arms.sync(registry.runtimes(), registry.config);
        return result;
      });
      reloading = done.catch(() => {});
      return done;
    },
    drain: (options) => drainServer(gateway.shutdown, { shutdown: stopServing }, options, deps.log),
    async close() {
      await reloading;
      await shapeChecks.close();
      await Promise.all(registry.runtimes().map((r) => background.stop(r)));
      await stopServing();
      deps.tokenizerPools.close();
      deps.requestWorkers?.close();
      work.loopLag.stop();
      await deps.shared?.close();
      deps.masterConnections?.close();
    },
  };
}

/** Listens on the configured address (routes/listener.ts); rejects with AddrInUse at once. */
function serve(
  app: Hono,
  config: Config,
  overrides: { hostname?: string; port?: number; signal?: AbortSignal },
  log: RouterDeps["log"],
): Promise<Listening> {
  return listen(config.listen.server, {
    hostname: overrides.hostname ?? config.listen.host,
    port: overrides.port ?? config.listen.port,
    signal: overrides.signal,
    limits: config.limits,
    onError: (error) => {
      log("http server error", { level: "error", error: (error as Error)?.stack ?? String(error) });
      return openAIError(500, "Internal router error", { code: "internal_error" });
    },
    handler: (request, remoteAddr) => app.fetch(request, { remoteAddr }),
  });
}

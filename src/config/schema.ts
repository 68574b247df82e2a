import { z } from "zod";
import { parseHostPattern } from "./host_allow_list.ts";
import { checkModel } from "./model_checks.ts";
import { ModelSchema } from "./model_schema.ts";
import { MAX_PRIORITY, MIN_PRIORITY } from "../scheduling/priority_band.ts";

export * from "./model_schema.ts";

/**
 * The router's configuration, validated in one pass so every problem is reported at start with
 * its field path: the models (model_schema.ts, each checked by model_checks.ts) and the sections
 * around them. Each default is written once, on its field: a section left out is
 * `.prefault({})`, i.e. parsed from `{}`, so it takes its fields' defaults.
 */
const TenantRatesSchema = z.strictObject({
  requestsPerS: z.number().positive().optional(),
  promptTokensPerS: z.number().positive().optional(),
  /** Seconds of its rate a quiet tenant may spend at once (the buckets' size). */
  burstS: z.number().positive().default(1),
  /** Its share of the admission budget while SLO admission is refusing (docs/api.md, "Tenants"). */
  weight: z.number().positive().default(1),
  /**
   * Its requests' priority band in the flow-control queue (lower goes first, as in vLLM), when
   * they name none (`priority` in the body or `x-tidegate-priority`).
   */
  priority: z.int().min(MIN_PRIORITY).max(MAX_PRIORITY).default(0),
  /** The most urgent band its requests may ask for (default: its own `priority`). */
  minPriority: z.int().min(MIN_PRIORITY).max(MAX_PRIORITY).optional(),
});

const TenantsSchema = z.strictObject({
  /**
   * What names a client: its API key (`Authorization: Bearer …`), the body's `user`, or a header
   * (`header:x-tenant`).
   */
  by: z.union([
    z.enum(["api_key", "user"]),
    z.string().regex(/^header:[A-Za-z0-9-]+$/, 'a header as "header:NAME"'),
  ]).default("api_key"),
  list: z.array(TenantRatesSchema.extend({
    /** A metric label: only configured names ever become one. */
    name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, "1-64 letters, digits, _ . -")
      .refine((name) => name !== "other", '"other" names the clients no tenant matches'),
    /** The identities of this tenant; `env:NAME` reads one from the environment. */
    match: z.array(z.string().min(1)).min(1),
  })).default([]),
  /** Limits shared by every client no tenant matches (tenant "other"); absent: unlimited. */
  others: TenantRatesSchema.optional(),
});

export const ConfigSchema = z.strictObject({
  listen: z.strictObject({
    host: z.string().min(1).default("127.0.0.1"),
    port: z.int().min(0).max(65535).default(8080),
    /**
     * `node`: node:http, with the connection limits below; `deno`: Deno.serve, with none of
     * them and blind to clients leaving before the engine answers (docs/reliability.md).
     */
    server: z.enum(["node", "deno"]).default("node"),
    /**
     * Peers whose `X-Forwarded-For` is believed (addresses and CIDR blocks): the router appends
     * the peer's address to theirs; anyone else's is replaced by the peer's address alone.
     */
    trustedProxies: z.array(
      z.string().refine((entry) => parseHostPattern(entry)?.kind === "network", {
        error: "expected an IP address or a CIDR block (10.0.0.0/8, fd00::/8)",
      }),
    ).default([]),
  }).prefault({}),
  limits: z.strictObject({
    maxBodyBytes: z.int().min(1).default(32 * 1024 * 1024),
    /** Upstream must send response headers within this time, else the attempt is a timeout. */
    upstreamHeadersTimeoutMs: z.int().min(1).default(60_000),
    /** Attempts per request: the first try plus at most this many retries elsewhere. */
    maxRetries: z.int().min(0).max(10).default(2),
    /**
     * After its headers, an engine silent this long has failed (a long prefill can keep a
     * stream quiet for tens of seconds): the stream ends with an error event, counted.
     */
    upstreamIdleTimeoutMs: z.int().min(1).default(120_000),
    /** An answer still streaming after this long is ended the same way. */
    maxRequestDurationMs: z.int().min(1).default(1_800_000),
    /** A client must send its whole request body within this time, else 408. */
    clientBodyTimeoutMs: z.int().min(1).default(30_000),
    /** Inference requests in flight (streams included); beyond it 503 `router_overloaded`. */
    maxConcurrentRequests: z.int().min(1).default(8_192),
    /** A client must send its request headers within this time, else the connection closes. */
    clientHeaderTimeoutMs: z.int().min(1).default(30_000),
    /** An idle keep-alive connection closes after this long (above common balancers' 60 s). */
    clientKeepAliveTimeoutMs: z.int().min(1).default(75_000),
    /** Open client connections; a connection beyond it gets 503 `router_overloaded` and closes. */
    maxConnections: z.int().min(1).default(16_384),
  }).prefault({}),
  /** SIGTERM: `/readyz` fails at once, serving goes on, then in-flight requests drain. */
  shutdown: z.strictObject({
    /** Keep serving this long after `/readyz` turns 503, so load balancers stop sending. */
    readyDelayMs: z.int().min(0).default(5_000),
    /** Then wait this long for in-flight requests; what remains ends with an error event. */
    drainTimeoutMs: z.int().min(0).default(30_000),
  }).prefault({}),
  admin: z.strictObject({
    /** Bearer token for /admin; `env:NAME` reads it from the environment. */
    token: z.string().min(1).optional(),
    /**
     * Hosts instance URLs may point at (host names, IP addresses, CIDR blocks): admin-registered
     * ones get 400 outside it, discovered ones are skipped, logged and counted. Unset: the hosts
     * of the configured instances, the discovery host names and the addresses they resolve to.
     */
    allowedInstanceHosts: z.array(
      z.string().refine((entry) => parseHostPattern(entry) !== undefined, {
        error: "expected a host name, an IP address or a CIDR block (10.0.0.0/8, fd00::/8)",
      }),
    ).optional(),
  }).prefault({}),
  /** Per-tenant rate limits (docs/api.md, "Tenants"); absent: no limits. */
  tenants: TenantsSchema.optional(),
  /**
   * Deno Workers that tokenize text and chat prompts off the main loop. Absent: one per core;
   * 0: tokenize on the main loop.
   */
  workers: z.int().min(0).max(64).optional(),
  cluster: z.strictObject({
    /** Router replicas share their dispatch-time facts (leases, predicted keys) through Redis. */
    sharedState: z.strictObject({
      /** `redis://[user:pass@]host:port[/db]`; `env:NAME` reads it from the environment. */
      redis: z.string().regex(/^(env:|rediss?:\/\/)/, "a redis:// or rediss:// URL, or env:NAME"),
      /** Prefix of the Redis channel and keys, so several clusters can share one Redis. */
      prefix: z.string().min(1).default("tidegate"),
      /** A Redis command slower than this counts as a failure (the replica keeps its own view). */
      timeoutMs: z.int().min(1).default(250),
      /** Period of each replica's snapshot of its live leases (repairs ends lost in an outage). */
      heartbeatMs: z.int().min(10).default(5_000),
      /** A replica not heard from for this long is gone: its leases are released. */
      silentAfterMs: z.int().min(1).default(15_000),
    }).refine((shared) => shared.silentAfterMs > shared.heartbeatMs, {
      message: "silentAfterMs must exceed heartbeatMs (a live replica is heard once per beat)",
      path: ["silentAfterMs"],
    }).optional(),
  }).prefault({}),
  models: z.array(ModelSchema.superRefine(checkModel)).min(1, "at least one model is required"),
}).superRefine((config, ctx) => {
  // Across models (each model's own checks ran as it parsed: src/config/model_checks.ts).
  const names = new Map<string, number>();
  config.models.forEach((model, m) => {
    checkModelNames(model, m, names, ctx);
    checkExperimentOverride(model, m, config.admin.token, ctx);
  });
  if (config.tenants) checkTenants(config.tenants, ctx);
});

/** Tenant names and identities are unique: an identity must name exactly one tenant. */
function checkTenants(tenants: z.output<typeof TenantsSchema>, ctx: z.RefinementCtx): void {
  const names = new Set<string>();
  const identities = new Map<string, string>();
  [...tenants.list, ...(tenants.others ? [tenants.others] : [])].forEach((tenant, t) => {
    if (tenant.minPriority !== undefined && tenant.minPriority > tenant.priority) {
      const path = t < tenants.list.length ? ["tenants", "list", t] : ["tenants", "others"];
      addIssue(
        ctx,
        [...path, "minPriority"],
        `minPriority ${tenant.minPriority} is less urgent than the tenant's own priority ` +
          `${tenant.priority} (lower goes first)`,
      );
    }
  });
  tenants.list.forEach((tenant, t) => {
    if (names.has(tenant.name)) {
      addIssue(ctx, ["tenants", "list", t, "name"], `duplicate tenant "${tenant.name}"`);
    }
    names.add(tenant.name);
    tenant.match.forEach((identity, i) => {
      const owner = identities.get(identity);
      if (owner !== undefined) {
        const message = `already matches tenant "${owner}"`;
        addIssue(ctx, ["tenants", "list", t, "match", i], message);
      }
      identities.set(identity, tenant.name);
    });
  });
}

type Model = z.output<typeof ModelSchema>;

function addIssue(ctx: z.RefinementCtx, path: PropertyKey[], message: string): void {
  ctx.addIssue({ code: "custom", path, message });
}

/** Names, aliases and LoRA names share one namespace across all models (`names`: name → index). */
function checkModelNames(
  model: Model,
  m: number,
  names: Map<string, number>,
  ctx: z.RefinementCtx,
): void {
  for (const name of [model.name, ...model.aliases, ...model.loras.map((l) => l.name)]) {
    const seen = names.get(name);
    if (seen !== undefined) {
      addIssue(
        ctx,
        ["models", m, "name"],
        `model name "${name}" is already used by models[${seen}]`,
      );
    } else names.set(name, m);
  }
}

/** The arm-override header is honoured only with the admin token, so it needs one. */
function checkExperimentOverride(
  model: Model,
  m: number,
  adminToken: string | undefined,
  ctx: z.RefinementCtx,
): void {
  if (model.experiment?.overrideHeader && !adminToken) {
    addIssue(
      ctx,
      ["models", m, "experiment", "overrideHeader"],
      "needs admin.token: the override is honoured only with the admin token",
    );
  }
}

export type Config = z.infer<typeof ConfigSchema>;
export type ModelConfig = Config["models"][number];

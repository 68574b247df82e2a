import { type Context, Hono } from "hono";
import type { InstanceStatus } from "../src/cluster/model_cluster.ts";
import { urlHost } from "../src/config/instance_url.ts";
import { formatPath } from "../src/config/load.ts";
import { type InstanceConfig, InstanceSchema } from "../src/config/schema.ts";
import type { ModelRegistry } from "../src/runtime/model_registry.ts";
import { adminInstanceHosts } from "../src/runtime/instance_host_policy.ts";
import { HttpError } from "../src/openai/errors.ts";
import { readJsonBody } from "./json_body.ts";
import { bodyBounds } from "./read_body.ts";

export interface AdminRoutesOptions {
  log: (message: string, fields?: Record<string, unknown>) => void;
}

/**
 * `/admin/instances` (mounted under `/admin`, behind src/admin/auth.ts):
 *
 *   GET    /instances[?model=M]          every instance: health, breaker, load terms, engine
 *                                         report and its age, recent TTFT
 *   POST   /instances                    add or update {model, instance: {id, url, kvHost?,
 *                                         role?, engine?}}; it takes traffic once /health passes
 *   POST   /instances/{model}/{id}/drain  no new requests; in-flight ones finish
 *   DELETE /instances/{model}/{id}        drain, then forget once idle
 *
 * A model name holding "/" is sent URL-encoded (`Qwen%2FQwen3-8B`); aliases work too.
 */
export function adminRoutes(models: ModelRegistry, options: AdminRoutesOptions): Hono {
  const app = new Hono();

  app.get("/instances", (c) => {
    const wanted = c.req.query("model");
    const runtimes = wanted === undefined ? models.runtimes() : [models.require(wanted)];
    return c.json({
      models: runtimes.map((runtime) => ({
        model: runtime.config.name,
        instances: runtime.cluster.status().map(instanceView),
      })),
    });
  });

  app.post("/instances", (c) => addInstance(c, models, options));

  app.post("/instances/:model/:id/drain", (c) => {
    const { model, id } = c.req.param();
    const runtime = models.require(model);
    if (!runtime.cluster.drain(id)) throw notFoundInstance(model, id);
    options.log("admin: instance drained", { model: runtime.config.name, instance: id });
    const status = runtime.cluster.status().find((s) => s.id === id);
    return c.json({ model: runtime.config.name, instance: status && instanceView(status) });
  });

  app.delete("/instances/:model/:id", (c) => {
    const { model, id } = c.req.param();
    const runtime = models.require(model);
    const active = runtime.cluster.get(id)?.active ?? 0;
    if (!runtime.cluster.remove(id)) throw notFoundInstance(model, id);
    options.log("admin: instance removed", { model: runtime.config.name, instance: id, active });
    return c.json({
      model: runtime.config.name,
      instance: id,
      removed: true,
      /** Requests still running on it; it is forgotten when the last one ends. */
      inFlight: active,
    });
  });

  return app;
}

/** `POST /instances`: adds or updates an instance and answers with its first probe's verdict. */
async function addInstance(
  c: Context,
  models: ModelRegistry,
  options: AdminRoutesOptions,
): Promise<Response> {
  const body = await readJsonBody(
    c,
    "{model, instance: {id, url, ...}}",
    bodyBounds(models.config),
  );
  const { model, instance } = (body ?? {}) as { model?: unknown; instance?: unknown };
  if (typeof model !== "string") {
    throw new HttpError(400, "'model' must be the name of a configured model", {
      param: "model",
      code: "invalid_value",
    });
  }
  const runtime = models.require(model);
  const config = parseInstance(instance);
  refuseDisallowedHost(models, config.url);
  if (config.role !== "neutral" && !runtime.config.disaggregation) {
    throw new HttpError(
      400,
      `Invalid instance: role "${config.role}" needs a model with disaggregation; ` +
        `'${runtime.config.name}' serves whole requests`,
      { param: "instance.role", code: "invalid_value" },
    );
  }
  const cluster = runtime.cluster;
  const change = cluster.upsert(config, "admin", { initialState: "starting" });
  // Answer with a verdict: one probe now (bounded by health.timeoutMs) instead of "unknown".
  await cluster.probeInstance(config.id).catch(() => {});
  options.log("admin: instance added", {
    model: runtime.config.name,
    instance: config.id,
    url: config.url,
    change,
  });
  const status = cluster.status().find((s) => s.id === config.id);
  return c.json(
    { model: runtime.config.name, change, instance: status && instanceView(status) },
    change === "added" ? 201 : 200,
  );
}

/** The instance of an admin request, validated like the config file's; a 400 naming each field. */
function parseInstance(instance: unknown): InstanceConfig {
  const parsed = InstanceSchema.safeParse(instance);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => {
    const path = ["instance", ...issue.path];
    return issue.code === "unrecognized_keys"
      ? `${issue.keys.map((k) => formatPath([...path, k])).join(", ")}: unknown field`
      : `${formatPath(path)}: ${issue.message}`;
  });
  throw new HttpError(400, `Invalid instance: ${problems.join("; ")}`, {
    param: "instance",
    code: "invalid_value",
  });
}

/** 400 unless `admin.allowedInstanceHosts` (or its default) lets instances use the URL's host. */
function refuseDisallowedHost(models: ModelRegistry, url: string): void {
  const host = urlHost(url) ?? "";
  const discovered = models.runtimes().flatMap((runtime) =>
    runtime.cluster.status().filter((s) => s.origin === "discovery").flatMap((s) =>
      urlHost(s.url) ?? []
    )
  );
  if (adminInstanceHosts(models.config, discovered).allows(host)) return;
  const configured = models.config.admin.allowedInstanceHosts !== undefined;
  throw new HttpError(
    400,
    `Invalid instance: host '${host}' is not allowed for instances (admin.allowedInstanceHosts${
      configured ? "" : " is unset: only the configured and discovered instances' hosts are"
    })`,
    { param: "instance.url", code: "instance_host_not_allowed" },
  );
}

function notFoundInstance(model: string, id: string): HttpError {
  return new HttpError(404, `Model '${model}' has no instance '${id}'`, {
    code: "instance_not_found",
  });
}

/** One instance as the admin API shows it (JSON-ready; times in ms and seconds as named). */
export function instanceView(status: InstanceStatus): Record<string, unknown> {
  const report = status.engineReport;
  return {
    id: status.id,
    url: status.url,
    kvHost: status.kvHost ?? null,
    role: status.role,
    engine: status.engine,
    bootstrapPort: status.bootstrapPort ?? null,
    origin: status.origin,
    healthy: status.healthy,
    breaker: status.breaker,
    draining: status.draining,
    activeRequests: status.active,
    probeFailures: status.probeFailures,
    load: status.load,
    engineReport: report
      ? {
        report: report.report ?? null,
        ageMs: report.ageMs ?? null,
        stale: !report.usable,
        lastError: report.lastError ?? null,
        consecutiveFailures: report.consecutiveFailures,
      }
      : null,
    recentTtftS: status.recentTtftS,
  };
}

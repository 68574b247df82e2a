import { Hono } from "hono";
import { changeAdapter } from "../src/gateway/adapter_loading.ts";
import { HttpError } from "../src/openai/errors.ts";
import type { ModelRuntime } from "../src/runtime/model_runtime.ts";
import type { ModelRegistry } from "../src/runtime/model_registry.ts";
import { readJsonBody } from "./json_body.ts";
import { bodyBounds } from "./read_body.ts";

export interface AdminAdaptersOptions {
  fetch: typeof fetch;
  log: (message: string, fields?: Record<string, unknown>) => void;
}

/**
 * `/admin/adapters` (mounted under `/admin`, behind src/admin/auth.ts): the LoRA adapters across
 * the pool, as the instances' `/v1/models` list them (src/cluster/adapter_catalog.ts).
 *
 *   GET    /adapters[?model=M]         every adapter: its path and the instances holding it
 *   POST   /adapters                   load {model, name, path, instances?} on the given instances
 *                                      (default: every instance of the model)
 *   DELETE /adapters/{model}/{name}    unload it from every instance holding it
 *
 * Loading and unloading use vLLM's runtime LoRA routes (VLLM_ALLOW_RUNTIME_LORA_UPDATING); the
 * answer names each instance's outcome, the engine's words when it refused.
 */
export function adminAdapterRoutes(models: ModelRegistry, options: AdminAdaptersOptions): Hono {
  const app = new Hono();

  app.get("/adapters", (c) => {
    const wanted = c.req.query("model");
    const runtimes = wanted === undefined ? models.runtimes() : [models.require(wanted)];
    return c.json({
      models: runtimes.map((runtime) => ({
        model: runtime.config.name,
        adapters: [...runtime.adapters.adapters()].map(([name, known]) => ({ name, ...known })),
      })),
    });
  });

  app.post("/adapters", async (c) => {
    const shape = '{"model", "name", "path", "instances"?: [ids]}';
    const body = await readJsonBody(c, shape, bodyBounds(models.config)) as Record<string, unknown>;
    const { model, name, path } = body ?? {};
    if (typeof model !== "string" || typeof name !== "string" || typeof path !== "string") {
      throw new HttpError(400, `Expected ${shape}`, { code: "invalid_value" });
    }
    const runtime = models.require(model);
    const ids = Array.isArray(body.instances)
      ? body.instances.map(String)
      : runtime.cluster.entries().map((e) => e.config.id);
    const results = await onInstances(runtime, ids, async (id, url) => {
      await changeAdapter(url, "load", name, path, adapterDeps(models, options));
      runtime.adapters.noteLoaded(id, name, path);
    });
    options.log("admin: lora adapter loaded", { model: runtime.config.name, adapter: name });
    return c.json({ model: runtime.config.name, adapter: name, instances: results });
  });

  app.delete("/adapters/:model/:name", async (c) => {
    const { model, name } = c.req.param();
    const runtime = models.require(model);
    const holders = runtime.adapters.holders(name);
    if (holders.length === 0) {
      throw new HttpError(404, `No instance of '${runtime.config.name}' lists adapter '${name}'`, {
        code: "adapter_not_found",
      });
    }
    const results = await onInstances(runtime, holders, async (id, url) => {
      await changeAdapter(url, "unload", name, undefined, adapterDeps(models, options));
      runtime.adapters.noteUnloaded(id, name);
    });
    options.log("admin: lora adapter unloaded", { model: runtime.config.name, adapter: name });
    return c.json({ model: runtime.config.name, adapter: name, instances: results });
  });

  return app;
}

function adapterDeps(models: ModelRegistry, options: AdminAdaptersOptions) {
  return { fetch: options.fetch, timeoutMs: models.config.limits.upstreamHeadersTimeoutMs };
}

/** Runs `change` on each instance at once; each one's outcome, an unknown id's included. */
async function onInstances(
  runtime: ModelRuntime,
  ids: string[],
  change: (id: string, url: string) => Promise<void>,
): Promise<{ id: string; ok: boolean; error?: string }[]> {
  return await Promise.all(ids.map(async (id) => {
    const entry = runtime.cluster.get(id);
    if (!entry) return { id, ok: false, error: "no such instance" };
    try {
      await change(id, entry.config.url);
      return { id, ok: true };
    } catch (error) {
      return { id, ok: false, error: (error as Error).message };
    }
  }));
}

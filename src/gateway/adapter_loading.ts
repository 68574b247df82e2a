/**
 * LoRA adapters where they are loaded (src/cluster/adapter_catalog.ts): which instances may take
 * an adapter's request, and, with `loraLoading`, loading an adapter no instance lists on the
 * instance the plan chose (vLLM's `/v1/load_lora_adapter`; "already loaded" counts as loaded).
 */
import type { DispatchPlan } from "../contracts.ts";
import { joinUrl } from "../proxy/forward.ts";
import type { ModelRuntime } from "../runtime/model_runtime.ts";

/** The instances listing `adapter`; undefined (any instance) when none does or none is known. */
export function holdingAdapter(
  runtime: ModelRuntime,
  adapter: string | undefined,
): ((instanceId: string) => boolean) | undefined {
  if (!adapter) return undefined;
  const holders = new Set(runtime.adapters.holders(adapter));
  return holders.size > 0 ? (id) => holders.has(id) : undefined;
}

export interface AdapterLoadDeps {
  fetch: typeof fetch;
  timeoutMs: number;
  log: (message: string, fields?: Record<string, unknown>) => void;
}

/**
 * Loads `adapter` on the plan's first choice when `loraLoading` is on and no instance lists it. A
 * failed load is logged and the request goes on: the engine's own answer then tells the client.
 */
export async function loadMissingAdapter(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  adapter: string | undefined,
  deps: AdapterLoadDeps,
): Promise<void> {
  if (!adapter || !runtime.config.loraLoading) return;
  if (runtime.adapters.holders(adapter).length > 0) return;
  const target = plan.decision.ranking[0];
  const entry = target === undefined ? undefined : plan.entries.get(target);
  const path = runtime.config.loras.find((l) => l.adapter === adapter)?.path;
  if (!entry || !path) return;
  try {
    await changeAdapter(entry.config.url, "load", adapter, path, deps);
    runtime.adapters.noteLoaded(entry.config.id, adapter, path);
    deps.log("lora adapter loaded", { adapter, instance: entry.config.id });
  } catch (error) {
    deps.log("lora adapter load failed", {
      level: "warn",
      adapter,
      instance: entry.config.id,
      error: (error as Error).message,
    });
  }
}

/**
 * vLLM's runtime LoRA routes on one instance: `/v1/load_lora_adapter` ("already loaded" counts as
 * loaded) or `/v1/unload_lora_adapter`. Throws with the engine's words when it refuses.
 */
export async function changeAdapter(
  instanceUrl: string,
  action: "load" | "unload",
  adapter: string,
  path: string | undefined,
  deps: Pick<AdapterLoadDeps, "fetch" | "timeoutMs">,
): Promise<void> {
  const url = joinUrl(instanceUrl, `/v1/${action}_lora_adapter`);
  const response = await deps.fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(
      action === "load" ? { lora_name: adapter, lora_path: path } : {
        lora_name: adapter,
      },
    ),
    signal: AbortSignal.timeout(deps.timeoutMs),
  });
  const text = await response.text();
  if (response.ok || (action === "load" && /already/i.test(text))) return;
  throw new Error(`HTTP ${response.status}: ${text.slice(0, 500)}`);
}

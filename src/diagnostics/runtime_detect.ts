import { keySchemeOptionsFromKv } from "../hashing/key_scheme.ts";
import { readKeySampleFromMasters } from "../kv/key_sample.ts";
import { masterUrls } from "../config/kv_masters.ts";
import { MooncakeClient } from "../kv/mooncake_client.ts";
import { detectKeySchemes, type DetectResult } from "./kv_detect.ts";
import type { ModelRuntime } from "../runtime/model_runtime.ts";

/** Keys per request: a probe asks thousands, but Deno's fetch refuses URLs over 64 KiB. */
const DETECT_BATCH = 384;

/**
 * Detection for one model's configured store: a client of its own (the serving client's
 * health gate and deadline stay untouched), hints from a bounded `/get_all_keys` sample, then
 * `detectKeySchemes`. Undefined `url`: the model has no Mooncake store.
 */
export async function detectForRuntime(
  runtime: ModelRuntime,
  prompts: readonly (readonly number[])[],
  deps: { fetch?: typeof fetch; now?: () => number; deadlineMs?: number } = {},
): Promise<DetectResult & { sampledKeys: number }> {
  const kv = runtime.config.kv;
  const urls = masterUrls(kv);
  if (kv.store !== "mooncake" || urls.length === 0) {
    throw new Error(`Model ${runtime.config.name} has no store configured (kv.store is "none")`);
  }
  const deadlineMs = deps.deadlineMs ?? 1_500;
  const sample = await readKeySampleFromMasters(urls, {
    fetch: deps.fetch,
    timeoutMs: Math.min(500, deadlineMs),
  });
  const client = new MooncakeClient({
    url: urls,
    fetch: deps.fetch,
    now: deps.now,
    batchSize: DETECT_BATCH,
    deadlineMs,
  });
  const result = await detectKeySchemes({
    client,
    configured: keySchemeOptionsFromKv(kv, runtime.config.name),
    model: runtime.keyScheme.options.model ?? runtime.config.name,
    prompts,
    sampleKeys: sample.keys,
    deadlineMs,
    now: deps.now,
  });
  return { ...result, sampledKeys: sample.keys.length };
}

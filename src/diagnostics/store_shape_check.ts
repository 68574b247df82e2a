import { countKeyShapes, type KeyShape, keyShape, shapeMismatch } from "../hashing/key_shapes.ts";
import { readKeySampleFromMasters } from "../kv/key_sample.ts";
import { masterUrls } from "../config/kv_masters.ts";
import { untracedFetch } from "../telemetry/tracing.ts";
import type { ModelRuntime } from "../runtime/model_runtime.ts";
import { detectCommand } from "../runtime/detect_command.ts";

export interface ShapeCheckOptions {
  fetch?: typeof fetch;
  log: (message: string, fields?: Record<string, unknown>) => void;
  /** Whole read of the sample (default 2 s). */
  timeoutMs?: number;
  /** Sample bytes read at most (default 256 KiB). */
  maxBytes?: number;
  signal?: AbortSignal;
  /** The router's config file, for the command the warning suggests. */
  configPath?: string;
}

/** What the check concluded: `unknown` when the store could not be read or said nothing. */
type ShapeVerdict = "matches" | "mismatch" | "unknown";

/**
 * The start-up shape check: a bounded sample of the store's keys (`GET /get_all_keys`) and the
 * layouts in it. When the configured layout is absent and another one is present, one warning
 * says what the store holds and which command finds the right scheme. Never throws.
 */
export async function checkStoreShape(
  runtime: ModelRuntime,
  options: ShapeCheckOptions,
): Promise<ShapeVerdict> {
  const kv = runtime.config.kv;
  const configured = configuredShape(runtime);
  const urls = masterUrls(kv);
  if (kv.store !== "mooncake" || urls.length === 0 || configured === undefined) return "unknown";
  const sample = await readKeySampleFromMasters(urls, {
    fetch: untracedFetch(options.fetch ?? fetch),
    timeoutMs: options.timeoutMs ?? 2_000,
    maxBytes: options.maxBytes ?? 256 * 1024,
    signal: options.signal,
  });
  const counts = countKeyShapes(sample.keys);
  const mismatch = shapeMismatch(configured, counts);
  if (mismatch === undefined) return Object.keys(counts).length > 0 ? "matches" : "unknown";
  const name = runtime.config.name;
  options.log(`warning: ${mismatch}: every lookup will miss`, {
    level: "warn",
    model: name,
    configured: { keyFormat: kv.keyFormat, layout: configured },
    storeHolds: counts,
    sampledKeys: sample.keys.length,
    run: `${detectCommand(name, options.configPath)} --prompt "<a prompt the engines served>"`,
  });
  return "mismatch";
}

/** The layout of the configured scheme's keys (undefined for a template that fits no preset). */
function configuredShape(runtime: ModelRuntime): KeyShape | undefined {
  try {
    const chunk = Array.from({ length: runtime.keyScheme.options.chunkSize }, (_, i) => i);
    return keyShape(runtime.keyScheme.keys(chunk)[0]);
  } catch {
    return undefined;
  }
}

/** The checks started with the router, cancelled when it closes. */
export class StoreShapeChecks {
  readonly #controller = new AbortController();
  readonly #running: Promise<ShapeVerdict>[] = [];

  start(runtimes: Iterable<ModelRuntime>, options: Omit<ShapeCheckOptions, "signal">): void {
    for (const runtime of runtimes) {
      this.#running.push(
        checkStoreShape(runtime, { ...options, signal: this.#controller.signal })
          .catch(() => "unknown" as const),
      );
    }
  }

  async close(): Promise<void> {
    this.#controller.abort();
    await Promise.all(this.#running);
  }
}

/**
 * Reads each instance's `GET /v1/models` on an interval into the model's AdapterCatalog, so that
 * a LoRA adapter's requests go only where it is loaded. Edge: `fetch`, timers and clock passed in.
 * An instance that does not answer keeps what was last known of it; one that left is forgotten.
 */
import type { AdapterCatalog, ModelListing } from "./adapter_catalog.ts";
import { fetchWithTimeout } from "./fetch_timeout.ts";
import { PeriodicTask } from "./periodic_task.ts";
import type { Timers } from "./timers.ts";

export interface AdapterPollerOptions {
  catalog: Pick<AdapterCatalog, "update" | "forget" | "adapters">;
  /** The instances to ask, each round. */
  instances: () => { id: string; url: string }[];
  fetch: typeof fetch;
  timers: Timers;
  now: () => number;
  intervalMs: number;
  timeoutMs: number;
  log: (message: string, fields?: Record<string, unknown>) => void;
}

export class AdapterPoller {
  readonly #options: AdapterPollerOptions;
  readonly #task: PeriodicTask;
  readonly #asked = new Set<string>();

  constructor(options: AdapterPollerOptions) {
    this.#options = options;
    this.#task = new PeriodicTask(
      () => this.pollOnce(),
      options.intervalMs,
      options.timers,
      options.now,
    );
  }

  start(): void {
    this.#task.start();
  }

  stop(): Promise<void> {
    return this.#task.stop();
  }

  /** One round: every instance asked at once. */
  async pollOnce(): Promise<void> {
    const instances = this.#options.instances();
    const ids = new Set(instances.map((i) => i.id));
    for (const id of this.#asked) {
      if (!ids.has(id)) {
        this.#options.catalog.forget(id);
        this.#asked.delete(id);
      }
    }
    await Promise.all(instances.map((instance) => this.#poll(instance)));
  }

  async #poll(instance: { id: string; url: string }): Promise<void> {
    const { fetch, timers, timeoutMs } = this.#options;
    try {
      const listing = await fetchWithTimeout(
        `${instance.url.replace(/\/+$/, "")}/v1/models`,
        { fetch, timers, timeoutMs },
        async (response) => {
          if (!response.ok) {
            await response.body?.cancel();
            throw new Error(`HTTP ${response.status}`);
          }
          return listingOf(await response.json());
        },
      );
      this.#options.catalog.update(instance.id, listing);
      this.#asked.add(instance.id);
    } catch (error) {
      this.#options.log("adapter listing failed", {
        level: "debug",
        instance: instance.id,
        error: (error as Error).message,
      });
    }
  }
}

/** The model cards of an OpenAI `/v1/models` answer; anything else is no listing. */
function listingOf(body: unknown): ModelListing[] {
  const data = (body as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) throw new Error("no model list in the answer");
  return data.filter((card) => typeof card?.id === "string").map((card) => ({
    id: card.id,
    parent: typeof card.parent === "string" ? card.parent : null,
    root: typeof card.root === "string" ? card.root : null,
  }));
}

/**
 * Which LoRA adapters each instance has loaded, as its `GET /v1/models` lists them (vLLM lists an
 * adapter with `parent`, its base model, and `root`, the path it was loaded from). Pure: the
 * poller (adapter_poller.ts) feeds it, the request path asks it.
 */

/** One entry of an engine's `/v1/models`, as far as adapters go. */
export interface ModelListing {
  id: string;
  parent?: string | null;
  root?: string | null;
}

export interface KnownAdapter {
  /** The path an instance loaded it from (`root`), when one says. */
  path?: string;
  instances: string[];
}

export class AdapterCatalog {
  /** Per instance that answered: adapter name → its path. */
  readonly #byInstance = new Map<string, Map<string, string | undefined>>();

  /** An instance's listing replaces what was known of it. */
  update(instanceId: string, listing: readonly ModelListing[]): void {
    const adapters = new Map<string, string | undefined>();
    for (const card of listing) {
      if (card.parent) adapters.set(card.id, card.root ?? undefined);
    }
    this.#byInstance.set(instanceId, adapters);
  }

  /** The router loaded `adapter` there itself (known before the next listing). */
  noteLoaded(instanceId: string, adapter: string, path: string | undefined): void {
    const adapters = this.#byInstance.get(instanceId) ?? new Map();
    adapters.set(adapter, path);
    this.#byInstance.set(instanceId, adapters);
  }

  /** The router unloaded `adapter` there itself. */
  noteUnloaded(instanceId: string, adapter: string): void {
    this.#byInstance.get(instanceId)?.delete(adapter);
  }

  /** The instance left the pool. */
  forget(instanceId: string): void {
    this.#byInstance.delete(instanceId);
  }

  /** Whether any instance's listing has been read: before that nothing is known. */
  get known(): boolean {
    return this.#byInstance.size > 0;
  }

  /** The instances whose listing has `adapter`. */
  holders(adapter: string): string[] {
    const out: string[] = [];
    for (const [id, adapters] of this.#byInstance) if (adapters.has(adapter)) out.push(id);
    return out;
  }

  /** Every adapter some instance lists, with its path and holders. */
  adapters(): Map<string, KnownAdapter> {
    const out = new Map<string, KnownAdapter>();
    for (const [id, adapters] of this.#byInstance) {
      for (const [name, path] of adapters) {
        const known = out.get(name) ?? { path, instances: [] };
        known.path ??= path;
        known.instances.push(id);
        out.set(name, known);
      }
    }
    return out;
  }
}

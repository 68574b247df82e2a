/**
 * The models the router serves: the running config and one runtime per model, found by name,
 * alias or LoRA name. The request path resolves a request's model here, the admin and health
 * routes read it, and a reload swaps it whole (src/runtime/reload.ts).
 */
import type { Config } from "../config/schema.ts";
import { HttpError, quoted } from "../openai/errors.ts";
import type { ModelRuntime } from "./model_runtime.ts";

/** A model name as a request gives it: its runtime, and the LoRA adapter it stands for. */
export interface ResolvedModel {
  runtime: ModelRuntime;
  loraName?: string;
}

/** One entry of `GET /v1/models`. */
export interface ModelCard {
  id: string;
  object: "model";
  created: number;
  owned_by: string;
  root: string;
  /** An adapter's base model (as vLLM lists adapters). */
  parent?: string;
}

export class ModelRegistry {
  #config: Config;
  #runtimes: Map<string, ModelRuntime>;
  #names = new Map<string, ResolvedModel>();
  readonly #wallNow: () => number;

  constructor(config: Config, runtimes: Map<string, ModelRuntime>, wallNow: () => number) {
    this.#config = config;
    this.#runtimes = runtimes;
    this.#wallNow = wallNow;
    this.#indexNames();
  }

  get config(): Config {
    return this.#config;
  }

  runtimes(): ModelRuntime[] {
    return [...this.#runtimes.values()];
  }

  /** The runtime of a configured model (by its own name only). */
  runtime(model: string): ModelRuntime | undefined {
    return this.#runtimes.get(model);
  }

  /** Swaps in a new configuration's runtimes; requests in flight keep their own. */
  replace(config: Config, runtimes: Map<string, ModelRuntime>): void {
    this.#config = config;
    this.#runtimes = runtimes;
    this.#indexNames();
  }

  /**
   * A name, alias or LoRA name as a request gives it; also an adapter not in the config that an
   * instance of a model lists in its `/v1/models` (src/cluster/adapter_catalog.ts).
   */
  resolve(name: string): ResolvedModel | undefined {
    const named = this.#names.get(name);
    if (named) return named;
    const runtime = this.#runtimes.values().find((r) => r.adapters.holders(name).length > 0);
    return runtime ? { runtime, loraName: name } : undefined;
  }

  /** The runtime serving a model name or alias; throws the OpenAI 404 when there is none. */
  require(name: string): ModelRuntime {
    const resolved = this.#names.get(name);
    if (!resolved) throw this.unknownModel(name);
    return resolved.runtime;
  }

  /** The 404 for a model name no runtime serves (inference and admin routes alike). */
  unknownModel(name: string): HttpError {
    return new HttpError(
      404,
      `The model '${quoted(name)}' does not exist: use one of ${
        [...this.#names.keys()].join(", ")
      }.`,
      { param: "model", code: "model_not_found" },
    );
  }

  /**
   * `GET /v1/models` in OpenAI's shape: names, aliases, configured LoRA names, and the adapters
   * the instances list that the config does not name (with `parent`, as vLLM lists them).
   */
  listModels(): { object: "list"; data: ModelCard[] } {
    const created = Math.floor(this.#wallNow() / 1000);
    const card = (id: string, root: string): ModelCard => ({
      id,
      object: "model",
      created,
      owned_by: "tidegate",
      root,
    });
    const data = [...this.#names.entries()].map(([id, { runtime }]) =>
      card(id, runtime.config.name)
    );
    const listed = new Set(this.#names.keys());
    for (const runtime of this.#runtimes.values()) {
      for (const adapter of runtime.adapters.adapters().keys()) {
        if (listed.has(adapter)) continue;
        listed.add(adapter);
        data.push({ ...card(adapter, runtime.config.name), parent: runtime.config.name });
      }
    }
    return { object: "list", data };
  }

  /** Each served name's `limits.maxPromptChars` (aliases and LoRA names too). */
  promptLimits(): Map<string, number> {
    const limits = new Map<string, number>();
    for (const [name, { runtime }] of this.#names) {
      limits.set(name, runtime.config.limits.maxPromptChars);
    }
    return limits;
  }

  #indexNames(): void {
    const names = new Map<string, ResolvedModel>();
    for (const runtime of this.#runtimes.values()) {
      const model = runtime.config;
      names.set(model.name, { runtime });
      for (const alias of model.aliases) names.set(alias, { runtime });
      for (const lora of model.loras) names.set(lora.name, { runtime, loraName: lora.adapter });
    }
    this.#names = names;
  }
}

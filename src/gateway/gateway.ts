import type { Config } from "../config/schema.ts";
import type { ExtraKeys } from "../hashing/types.ts";
import { HttpError } from "../openai/errors.ts";
import { parseOpenAIRequest } from "../openai/request.ts";
import { planDispatch } from "./dispatch_plan.ts";
import { executeDispatch } from "./execute_dispatch.ts";
import type { ModelRuntime, NamedPolicy } from "./model_runtime.ts";
import type { RequestObserver, RequestRecord } from "./request_record.ts";
import { RequestTracing } from "../telemetry/tracing.ts";

export interface GatewayDeps {
  fetch: typeof fetch;
  /** Monotonic milliseconds. */
  now: () => number;
  /** Wall-clock milliseconds. */
  wallNow: () => number;
  random: () => number;
  log: (message: string, fields?: Record<string, unknown>) => void;
}

/** A request's arm: its name (the `x-tidegate-arm` header) and the policy that plans it. */
export interface ArmSelection {
  arm: string;
  policy: NamedPolicy;
  /** Set inside an experiment: the arms' version and how this request was assigned. */
  experiment?: RequestRecord["experiment"];
  /** Request headers meant for the router alone (operator override): not forwarded. */
  privateHeaders?: readonly string[];
}

/** Picks the policy arm of a request (A/B experiments); the default is the model's policy. */
export interface ArmSelector {
  /** May throw an HttpError (e.g. 400 for an override naming no arm). */
  select(runtime: ModelRuntime, request: Request, body: Record<string, unknown>): ArmSelection;
  /** Called by `Gateway.replace()` (hot reload) with the new runtimes and config. */
  sync?(runtimes: Iterable<ModelRuntime>, config: Config): void;
}

const ENGINE_PATHS = { completions: "/v1/completions", chat: "/v1/chat/completions" } as const;

/**
 * The request path for inference endpoints: parse, resolve the model, plan, admit, proxy.
 * Never throws: every failure becomes an OpenAI-shaped error response.
 */
export class Gateway {
  #config: Config;
  #runtimes: Map<string, ModelRuntime>;
  /** Request model name → runtime (+ the LoRA adapter the name stands for). */
  #names = new Map<string, { runtime: ModelRuntime; loraName?: string }>();
  readonly #deps: GatewayDeps;
  readonly observers: RequestObserver[] = [];
  /** Span trees per request; a no-op unless a tracer provider records (OTEL_DENO or tests). */
  tracing = new RequestTracing();
  arms: ArmSelector = {
    select: (runtime) => ({ arm: "default", policy: runtime.defaultPolicy }),
  };

  constructor(config: Config, runtimes: Map<string, ModelRuntime>, deps: GatewayDeps) {
    this.#config = config;
    this.#runtimes = runtimes;
    this.#deps = deps;
    this.#indexNames();
  }

  get config(): Config {
    return this.#config;
  }

  runtimes(): ModelRuntime[] {
    return [...this.#runtimes.values()];
  }

  runtime(model: string): ModelRuntime | undefined {
    return this.#runtimes.get(model);
  }

  /** Swaps in a new configuration's runtimes (hot reload); in-flight requests keep their own. */
  replace(config: Config, runtimes: Map<string, ModelRuntime>): void {
    this.#config = config;
    this.#runtimes = runtimes;
    this.#indexNames();
    this.arms.sync?.(runtimes.values(), config);
  }

  resolveModel(name: string): { runtime: ModelRuntime; loraName?: string } | undefined {
    return this.#names.get(name);
  }

  /** The 404 for a model name no runtime serves (inference and admin routes alike). */
  unknownModel(name: string): HttpError {
    return new HttpError(
      404,
      `The model '${name}' does not exist: use one of ${[...this.#names.keys()].join(", ")}.`,
      { param: "model", code: "model_not_found" },
    );
  }

  /** `GET /v1/models` in OpenAI's shape, aliases and LoRA names included. */
  listModels(): {
    object: "list";
    data: { id: string; object: "model"; created: number; owned_by: string; root: string }[];
  } {
    const created = Math.floor(this.#deps.wallNow() / 1000);
    return {
      object: "list",
      data: [...this.#names.entries()].map(([id, { runtime }]) => ({
        id,
        object: "model" as const,
        created,
        owned_by: "tidegate",
        root: runtime.config.name,
      })),
    };
  }

  async handleInference(
    endpoint: "completions" | "chat",
    request: Request,
    bytes: Uint8Array<ArrayBuffer>,
    clientSignal?: AbortSignal,
  ): Promise<Response> {
    const { now } = this.#deps;
    const requestId = request.headers.get("x-request-id")?.slice(0, 200) || crypto.randomUUID();
    // "none" until an arm is assigned: a body that does not parse or an unknown model has no
    // experiment, yet every response says which arm served it.
    const responseHeaders = new Headers({ "x-request-id": requestId, "x-tidegate-arm": "none" });
    const record: RequestRecord = {
      requestId,
      model: "",
      endpoint,
      arm: "",
      stream: false,
      startedAt: now(),
      startedAtWallMs: this.#deps.wallNow(),
      attempts: [],
      status: 0,
      outcome: "ok",
      interTokenS: [],
      usage: {},
    };
    const route = `POST ${ENGINE_PATHS[endpoint]}`;
    const trace = this.tracing.begin(request, route, record.startedAt);
    const finish = (r: RequestRecord) => {
      trace.finish(r);
      for (const observer of this.observers) {
        try {
          observer.onFinished(r);
        } catch (error) {
          this.#deps.log("request observer failed", { error: (error as Error).message });
        }
      }
    };
    const answer = (error: HttpError, outcome: RequestRecord["outcome"]) => {
      record.status = error.status;
      record.outcome = outcome;
      record.error = error.message;
      record.durationS = (now() - record.startedAt) / 1000;
      finish(record);
      return error.toResponse(responseHeaders);
    };

    try {
      const parsed = parseOpenAIRequest(endpoint, bytes);
      record.stream = parsed.stream;
      const resolved = this.resolveModel(parsed.model);
      if (!resolved) {
        // Not the client's string: metric labels must stay a bounded set.
        record.model = "unknown";
        return answer(this.unknownModel(parsed.model), "client_error");
      }
      const { runtime } = resolved;
      record.model = runtime.config.name;
      const { arm, policy, experiment, privateHeaders } = this.arms.select(
        runtime,
        request,
        parsed.body,
      );
      record.arm = arm;
      record.experiment = experiment;
      responseHeaders.set("x-tidegate-arm", arm);
      let clientHeaders = request.headers;
      if (privateHeaders?.some((name) => clientHeaders.has(name))) {
        clientHeaders = new Headers(clientHeaders);
        for (const name of privateHeaders) clientHeaders.delete(name);
      }

      const extraKeys: ExtraKeys = {};
      if (resolved.loraName) extraKeys.loraName = resolved.loraName;
      if (parsed.cacheSalt) extraKeys.cacheSalt = parsed.cacheSalt;
      const plan = await planDispatch(runtime, parsed, {
        now,
        random: this.#deps.random,
        policy,
        extraKeys,
      });
      record.plan = plan;
      trace.planned(plan, record);
      for (const observer of this.observers) observer.onPlanned?.(record);

      if (!plan.admission.admit) {
        const verdict = plan.admission;
        responseHeaders.set("retry-after", String(verdict.retryAfterS));
        return answer(
          new HttpError(429, verdict.message, { type: "rate_limit_error", code: verdict.reason }),
          "rejected",
        );
      }
      return await executeDispatch({
        runtime,
        plan,
        record,
        path: ENGINE_PATHS[endpoint],
        clientHeaders,
        body: bytes,
        clientSignal,
        fetch: this.#deps.fetch,
        now,
        maxRetries: this.#config.limits.maxRetries,
        headersTimeoutMs: this.#config.limits.upstreamHeadersTimeoutMs,
        responseHeaders,
        finish,
        trace,
      });
    } catch (error) {
      if (error instanceof HttpError) return answer(error, "client_error");
      this.#deps.log("request failed inside the router", {
        requestId,
        error: (error as Error)?.stack ?? String(error),
      });
      return answer(
        new HttpError(500, `Internal router error: ${(error as Error)?.message ?? error}`, {
          code: "internal_error",
        }),
        "internal_error",
      );
    }
  }

  #indexNames(): void {
    const names = new Map<string, { runtime: ModelRuntime; loraName?: string }>();
    for (const runtime of this.#runtimes.values()) {
      const model = runtime.config;
      names.set(model.name, { runtime });
      for (const alias of model.aliases) names.set(alias, { runtime });
      for (const lora of model.loras) names.set(lora.name, { runtime, loraName: lora.adapter });
    }
    this.#names = names;
  }
}

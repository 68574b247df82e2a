import { HostAllowList } from "../config/host_allow_list.ts";
import { setForwardingHeaders } from "../proxy/forwarding_headers.ts";
import { upstreamHeaders } from "../proxy/hop_headers.ts";
import type { Config } from "../config/schema.ts";
import type {
  ArmSelection,
  ArmSelector,
  DispatchPlan,
  QueueRecord,
  RequestObserver,
  RequestRecord,
  RequestTrace,
  RequestTracer,
} from "../contracts.ts";
import type { ExtraKeys } from "../hashing/types.ts";
import type { ResponseHomes } from "../cluster/response_homes.ts";
import { RouteSupport } from "../cluster/route_support.ts";
import {
  type Endpoint,
  INFERENCE_PATHS,
  isInferenceEndpoint,
  type JsonEndpoint,
  type UploadEndpoint,
} from "../openai/endpoints.ts";
import { UploadBody } from "./upload_body.ts";
import { UPLOAD_REPLAY_BYTES, uploadModel, uploadRequest } from "./upload_request.ts";
import { HttpError } from "../openai/errors.ts";
import { errorAnswerFor } from "../openai/error_answer.ts";
import { modelNeeded } from "../openai/load_routed_request.ts";
import { InvalidRequestError, type ParsedRequest } from "../openai/request.ts";
import { requestStreamUsage } from "../proxy/stream_usage.ts";
import {
  chosenPrefill,
  decideDispatch,
  type PlanContext,
  planDispatch,
  type PlannedDispatch,
  type PreparedPrompt,
  preparePrompt,
} from "./dispatch_plan.ts";
import { FlowControl } from "./flow_control.ts";
import { queueTtlS } from "./queue_ttl.ts";
import { queueRefusal } from "./queue_answers.ts";
import {
  admitsFromQueue,
  idleTtftS,
  waitDeadlineMs,
  worthQueueing,
} from "../scheduling/queue_rules.ts";
import type { AdmissionRefusal } from "../scheduling/admission.ts";
import { heldRefusal, holdsOnArrival } from "../scheduling/late_binding.ts";
import { systemTimers, type Timers } from "../cluster/timers.ts";
import { parseRequest } from "./parse_request.ts";
import type { RequestWorkerPool } from "./request_worker_pool.ts";
import { executeDispatch } from "./execute_dispatch.ts";
import type { ModelRuntime } from "../runtime/model_runtime.ts";
import type { ModelRegistry } from "../runtime/model_registry.ts";
import type { Reservation } from "./reservation.ts";
import { refuseOverlongPrompt, refuseOversizedPrompt } from "./prompt_limits.ts";
import { ShutdownState } from "./shutdown_state.ts";
import { holdingAdapter, loadMissingAdapter } from "./adapter_loading.ts";
import { StoredResponses } from "./stored_responses.ts";
import { FairShareError, RateLimitedError, TenantGate } from "./tenant_gate.ts";

export interface GatewayDeps {
  fetch: typeof fetch;
  /** Monotonic milliseconds. */
  now: () => number;
  /** Wall-clock milliseconds. */
  wallNow: () => number;
  random: () => number;
  log: (message: string, fields?: Record<string, unknown>) => void;
}

/** What the request path reads of the model registry (src/runtime/model_registry.ts). */
export type GatewayModels = Pick<
  ModelRegistry,
  "config" | "resolve" | "unknownModel" | "promptLimits"
>;

/** What watches and steers each request, given once at construction. */
export interface GatewayCollaborators {
  /** Told once per finished request (metrics, experiment stats, decision log, dashboard). */
  observers?: readonly RequestObserver[];
  /** Span trees per request (default: none; routes/app.ts gives the OpenTelemetry one). */
  tracing?: RequestTracer;
  /** A/B arm per request (default: every request gets the model's own policy). */
  arms?: ArmSelector;
  /** Parses large bodies and hashes long prompts off the main loop (default: inline). */
  requestWorkers?: Pick<RequestWorkerPool, "parse" | "hash">;
  /** Which instances lack which load-routed path (default: a fresh memory). */
  routeSupport?: RouteSupport;
  /** Which instance stored which Responses API response (default: a fresh memory). */
  responseHomes?: ResponseHomes;
  /** The flow-control queue's timers (default: the runtime's). */
  timers?: Timers;
}

/** The client's connection, as the listener saw it. */
export interface ClientConnection {
  /** Aborts when the client leaves before response headers. */
  signal?: AbortSignal;
  /** The peer's IP address (absent for in-process requests). */
  address?: string;
}

/** One inference request while the gateway handles it. */
interface InFlight {
  request: Request;
  /** The path (and query) asked of the engine. */
  path: string;
  client: ClientConnection;
  record: RequestRecord;
  trace: RequestTrace;
  responseHeaders: Headers;
  /** The plan's reservations until executeDispatch takes them over. */
  reservation?: Reservation;
  decodeReservation?: Reservation;
  plan?: DispatchPlan;
  runtime?: ModelRuntime;
  loraName?: string;
  selection?: ArmSelection;
  /** Its wait in the queue ended: a re-plan still under way must not take anything. */
  queueSettled?: boolean;
  /** Admission's latest refusal while it waited (its Retry-After is repeated). */
  lastRefusal?: AdmissionRefusal;
  /** Its prompt's tokens and keys, for re-plans. */
  prepared?: PreparedPrompt;
}

const NO_TRACE: RequestTrace = {
  planned() {},
  attempt: () => ({ run: (fn) => fn(), end() {} }),
  finish() {},
};

const DEFAULT_ARMS: ArmSelector = {
  select: (model) => ({ arm: "default", policy: model.defaultPolicy }),
};

/**
 * The request path for inference endpoints: parse, resolve the model, plan, admit, proxy.
 * Never throws: every failure becomes an OpenAI-shaped error response.
 */
export class Gateway {
  readonly #registry: GatewayModels;
  readonly #deps: GatewayDeps;
  readonly #observers: readonly RequestObserver[];
  readonly #tracing: RequestTracer;
  readonly #arms: ArmSelector;
  readonly #requestWorkers: GatewayCollaborators["requestWorkers"];
  /** Draining and the final cut at shutdown (`/readyz` reads it; in-flight work obeys it). */
  readonly shutdown = new ShutdownState();
  /** Inference requests begun and not yet finished (streams count until their last byte). */
  #inFlight = 0;
  #inFlightRecords = new WeakSet<RequestRecord>();
  /** Tenants' held shares of admitted work, released when their request finishes. */
  #shares = new WeakMap<RequestRecord, () => void>();

  constructor(
    registry: GatewayModels,
    deps: GatewayDeps,
    collaborators: GatewayCollaborators = {},
  ) {
    this.#registry = registry;
    this.#deps = deps;
    this.#observers = [...(collaborators.observers ?? [])];
    this.#tracing = collaborators.tracing ?? { begin: () => NO_TRACE };
    this.#arms = collaborators.arms ?? DEFAULT_ARMS;
    this.#requestWorkers = collaborators.requestWorkers;
    this.#routeSupport = collaborators.routeSupport ?? new RouteSupport();
    this.#storedResponses = new StoredResponses({
      fetch: deps.fetch,
      now: deps.now,
      models: registry,
      timeoutMs: () => this.#config.limits.upstreamHeadersTimeoutMs,
    }, collaborators.responseHomes);
    this.#tenants = new TenantGate(registry.config.tenants, deps.now);
    this.#flow = new FlowControl({
      now: deps.now,
      timers: collaborators.timers ?? systemTimers(),
      draining: this.shutdown.drainSignal,
    });
    this.#trustedProxies = new HostAllowList(registry.config.listen.trustedProxies);
  }

  readonly #tenants: TenantGate;
  readonly #flow: FlowControl;
  /** Requests late binding holds, per model (they wait in `#flow` among the refused ones). */
  readonly #held = new Map<string, number>();
  readonly #routeSupport: RouteSupport;
  readonly #storedResponses: StoredResponses;
  #trustedProxies: HostAllowList;

  /** Inference requests in flight, streams included (`limits.maxConcurrentRequests`). */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Requests waiting in the flow-control queues, per model and band. */
  queueLengths(): Map<string, Map<number, number>> {
    return this.#flow.lengths();
  }

  /** The registry took a new config (hot reload): tenants and trusted proxies follow it. */
  configChanged(config: Config): void {
    this.#tenants.sync(config.tenants);
    this.#trustedProxies = new HostAllowList(config.listen.trustedProxies);
  }

  get #config(): Config {
    return this.#registry.config;
  }

  async handleInference(
    endpoint: JsonEndpoint,
    request: Request,
    body: Uint8Array<ArrayBuffer>,
    client: ClientConnection = {},
  ): Promise<Response> {
    const flight = this.#begin(endpoint, request, client);
    if (this.#inFlight > this.#config.limits.maxConcurrentRequests) return this.#overloaded(flight);
    try {
      const { parsed, bytes } = await this.#parse(flight, endpoint, body);
      return await this.#dispatch(flight, parsed, bytes);
    } catch (error) {
      return this.#failed(flight, error);
    }
  }

  /**
   * An upload (multipart audio): read up to its `model` field, routed by load, its body streamed
   * to the engine as it arrives (src/gateway/upload_body.ts); the rest as any request.
   */
  async handleUpload(
    endpoint: UploadEndpoint,
    request: Request,
    client: ClientConnection = {},
  ): Promise<Response> {
    const flight = this.#begin(endpoint, request, client);
    if (this.#inFlight > this.#config.limits.maxConcurrentRequests) return this.#overloaded(flight);
    const { limits } = this.#config;
    const upload = request.body
      ? new UploadBody(request.body.getReader(), {
        maxBytes: limits.maxBodyBytes,
        replayBytes: Math.min(limits.maxBodyBytes, UPLOAD_REPLAY_BYTES),
        timeoutMs: limits.clientBodyTimeoutMs,
        now: this.#deps.now,
      })
      : undefined;
    try {
      const model = await uploadModel(request, upload, limits.maxBodyBytes);
      const parsed = this.#resolve(flight, uploadRequest(endpoint, request, model));
      const response = await this.#dispatch(flight, parsed, upload!);
      // The client's body broke off or overran a limit while it streamed: that is the answer.
      return upload?.clientError && response.status >= 500
        ? errorAnswerFor(endpoint)(upload.clientError, flight.responseHeaders)
        : response;
    } catch (error) {
      upload?.discard();
      return this.#failed(flight, error);
    }
  }

  /** Plans, admits and sends a parsed request; the response, or an error for #failed. */
  async #dispatch(
    flight: InFlight,
    parsed: ParsedRequest,
    bytes: Uint8Array<ArrayBuffer> | UploadBody,
  ): Promise<Response> {
    const endpoint = parsed.endpoint;
    const client = flight.client;
    const verdict = await this.#plan(flight, parsed);
    if (verdict) return verdict;
    await loadMissingAdapter(flight.runtime!, flight.plan!, flight.loraName, {
      fetch: this.#deps.fetch,
      timeoutMs: this.#config.limits.upstreamHeadersTimeoutMs,
      log: this.#deps.log,
    });
    const { reservation, decodeReservation } = flight;
    flight.reservation = flight.decodeReservation = undefined; // executeDispatch owns them
    const openAI = endpoint === "completions" || endpoint === "chat";
    const sent = openAI && flight.runtime!.config.kv.requestStreamUsage &&
        !(bytes instanceof UploadBody)
      ? requestStreamUsage(bytes, parsed.body)
      : { bytes, body: parsed.body, strip: false };
    const response = await executeDispatch({
      runtime: flight.runtime!,
      plan: flight.plan!,
      reservation,
      decodeReservation,
      requestBody: sent.body,
      record: flight.record,
      path: flight.path,
      notFoundMeansNotServed: !isInferenceEndpoint(endpoint) || endpoint === "generate",
      errorAnswer: errorAnswerFor(endpoint),
      upstreamHeaders: this.#upstreamHeaders(flight),
      body: sent.bytes,
      stripStreamUsage: sent.strip,
      clientSignal: client.signal
        ? AbortSignal.any([client.signal, this.shutdown.cutSignal])
        : this.shutdown.cutSignal,
      shutdownSignal: this.shutdown.cutSignal,
      fetch: this.#deps.fetch,
      now: this.#deps.now,
      log: this.#deps.log,
      maxRetries: this.#config.limits.maxRetries,
      headersTimeoutMs: this.#config.limits.upstreamHeadersTimeoutMs,
      bodyLimits: {
        idleTimeoutMs: this.#config.limits.upstreamIdleTimeoutMs,
        maxDurationMs: this.#config.limits.maxRequestDurationMs,
        abort: this.shutdown.cutSignal,
      },
      responseHeaders: flight.responseHeaders,
      finish: (record) => {
        if (bytes instanceof UploadBody) bytes.discard();
        flight.runtime!.agreement.observe(record);
        this.#storedResponses.remember(record);
        this.#finish(flight.trace, record);
      },
      trace: flight.trace,
    });
    this.#noteRoutesNotServed(flight);
    return response;
  }

  /** Instances that answered 404 for a load-routed path are skipped for it a while. */
  #noteRoutesNotServed(flight: InFlight): void {
    for (const attempt of flight.record.attempts) {
      if (attempt.failure !== "not_served") continue;
      const model = flight.runtime!.config.name;
      this.#routeSupport.markNotServed(model, attempt.instanceId, flight.path, this.#deps.now());
    }
  }

  #begin(endpoint: Endpoint, request: Request, client: ClientConnection): InFlight {
    this.#inFlight++; // until #finish, once per record
    const now = this.#deps.now();
    const requestId = request.headers.get("x-request-id")?.slice(0, 200) || crypto.randomUUID();
    const record: RequestRecord = {
      requestId,
      model: "",
      endpoint,
      arm: "",
      stream: false,
      startedAt: now,
      startedAtWallMs: this.#deps.wallNow(),
      attempts: [],
      status: 0,
      outcome: "ok",
      interTokenS: [],
      usage: {},
    };
    this.#inFlightRecords.add(record);
    const path = isInferenceEndpoint(endpoint) ? INFERENCE_PATHS[endpoint] : pathOf(request);
    return {
      request,
      path,
      client,
      record,
      trace: this.#tracing.begin(request, `POST ${path}`, now),
      // "none" until an arm is assigned: a body that does not parse or an unknown model has no
      // experiment, yet every response says which arm served it.
      responseHeaders: new Headers({ "x-request-id": requestId, "x-tidegate-arm": "none" }),
    };
  }

  /** Parses the body and resolves its model and arm; throws HttpError for the client. */
  async #parse(
    flight: InFlight,
    endpoint: JsonEndpoint,
    body: Uint8Array<ArrayBuffer>,
  ): Promise<{ parsed: ParsedRequest; bytes: Uint8Array<ArrayBuffer> }> {
    const { record } = flight;
    let parsed: ParsedRequest;
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      ({ parsed, bytes } = await parseRequest(
        endpoint,
        body,
        this.#requestWorkers,
        () => this.#registry.promptLimits(),
      ));
    } catch (error) {
      // A refusal is counted under the model it names, when the router serves that model.
      const named = error instanceof InvalidRequestError ? error.model : undefined;
      record.model = (named && this.#registry.resolve(named)?.runtime.config.name) || "unknown";
      throw error;
    }
    return { parsed: this.#resolve(flight, parsed), bytes };
  }

  /** Resolves a parsed request's model, tenant and arm; throws HttpError for the client. */
  #resolve(flight: InFlight, parsed: ParsedRequest): ParsedRequest {
    const { record } = flight;
    const endpoint = parsed.endpoint;
    record.stream = parsed.stream;
    const resolved = this.#registry.resolve(parsed.model || this.#onlyModel(record, endpoint));
    if (!resolved) {
      // Not the client's string: metric labels must stay a bounded set.
      record.model = "unknown";
      throw this.#registry.unknownModel(parsed.model);
    }
    flight.runtime = resolved.runtime;
    record.model = resolved.runtime.config.name;
    refuseOversizedPrompt(resolved.runtime.config.limits.maxPromptChars, parsed.prompt);
    record.tenant = this.#tenants.tenantOf(flight.request, parsed);
    if (record.tenant) this.#chargeTenant(flight, "requests", 1);
    // A/B arms compare dispatch policies on inference; a load-routed request takes the default.
    const selection = isInferenceEndpoint(endpoint)
      ? this.#arms.select(resolved.runtime, flight.request, parsed.body)
      : DEFAULT_ARMS.select(resolved.runtime, flight.request, parsed.body);
    record.arm = selection.arm;
    record.experiment = selection.experiment;
    flight.responseHeaders.set("x-tidegate-arm", selection.arm);
    flight.selection = selection;
    flight.loraName = resolved.loraName;
    return parsed;
  }

  /**
   * A request that names no model goes to the router's only one (as vLLM's would); SGLang's
   * /generate, which has no model field, to its only model with SGLang engines.
   */
  #onlyModel(record: RequestRecord, endpoint: Endpoint): string {
    const names = this.#config.models.map((m) => m.name);
    if (names.length === 1) return names[0];
    if (endpoint === "generate") {
      const sglang = this.#config.models.filter(hasSglangEngines).map((m) => m.name);
      if (sglang.length === 1) return sglang[0];
    }
    record.model = "unknown";
    throw modelNeeded(names);
  }

  /**
   * Plans the request; a request admission refuses, or late binding holds, waits in the model's
   * flow-control queue when it has one, and is answered 429 (503 at shutdown) itself when it is
   * not admitted.
   */
  async #plan(flight: InFlight, parsed: ParsedRequest): Promise<Response | undefined> {
    const queue = flight.runtime!.config.slo.queue;
    // Load-routed requests and uploads are not queued: they are cheap, or their body streams.
    const queues = queue.enabled && isInferenceEndpoint(parsed.endpoint);
    // Decided in the plan's synchronous step: a request late binding holds reserves nothing (no
    // lease, no predicted keys that other replicas would learn and never see taken back).
    let held = false;
    const context = {
      ...this.#planContext(flight, parsed),
      reserveIf: (plan: DispatchPlan) => {
        held = queues && plan.admission.admit && this.#holds(flight, plan);
        return !held;
      },
    };
    const planned = await planDispatch(flight.runtime!, parsed, context);
    this.#adopt(flight, planned);
    flight.trace.planned(planned.plan, flight.record);
    if (!planned.plan.admission.admit) this.#tenants.noteRefusal(flight.runtime!.config.name);
    if (queues) {
      const early = await this.#waitIfQueued(flight, parsed, planned, held);
      if (early) return early;
    }
    const verdict = flight.plan!.admission;
    if (!verdict.admit) {
      flight.responseHeaders.set("retry-after", String(verdict.retryAfterS));
      const error = new HttpError(verdict.status, verdict.message, {
        type: "rate_limit_error",
        code: verdict.reason,
      });
      return this.#answer(flight, error, "rejected");
    }
    this.#admitted(flight, context.extraKeys);
    return undefined;
  }

  /**
   * A request late binding holds, or one admission refused that an idle instance could still
   * serve in time, waits in the model's queue: a response when its wait ended other than admitted
   * (then `flight.plan` is the admitting plan).
   */
  async #waitIfQueued(
    flight: InFlight,
    parsed: ParsedRequest,
    planned: PlannedDispatch & { prepared: PreparedPrompt },
    held: boolean,
  ): Promise<Response | undefined> {
    const queue = flight.runtime!.config.slo.queue;
    const refusal = planned.plan.admission;
    // Read for every request of a queueing model, so a bad header is a 400 under any load.
    const wait = {
      priority: this.#tenants.priorityOf(flight.request, parsed, flight.record.tenant),
      ttlS: queueTtlS(flight.request, queue.ttlS),
      cause: held ? "held" as const : "refused" as const,
    };
    if (!held && (refusal.admit || !this.#worthWaiting(flight, planned.plan, refusal))) return;
    flight.prepared = planned.prepared;
    const why = held ? heldRefusal(queue.holdAboveTokens!) : refusal;
    const model = flight.runtime!.config.name;
    if (held) this.#held.set(model, (this.#held.get(model) ?? 0) + 1);
    try {
      return await this.#waitInQueue(flight, parsed, why as AdmissionRefusal, wait);
    } finally {
      if (held) this.#held.set(model, this.#held.get(model)! - 1);
    }
  }

  /** An admitted request's tenant share, and its prompt kept for key detection. */
  #admitted(flight: InFlight, extraKeys: ExtraKeys | undefined): void {
    const model = flight.runtime!.config.name;
    if (flight.record.tenant) {
      // Given back when the request finishes; checked once the prompt was counted.
      const share = this.#tenants.holdShare(model, flight.record.tenant, flight.plan!.promptTokens);
      this.#shares.set(flight.record, share);
    }
    // Extra keys change every hash: such prompts would only confuse key detection.
    const { tokens } = flight.plan!;
    if (tokens && !extraKeys?.loraName && !extraKeys?.cacheSalt) {
      flight.runtime!.recentPrompts.add(tokens);
    }
  }

  #planContext(flight: InFlight, parsed: ParsedRequest): PlanContext {
    const eligible = this.#eligible(flight, parsed);
    const extraKeys: ExtraKeys = {};
    if (flight.loraName) {
      extraKeys.loraName = flight.loraName;
      // The adapter path: the "tagged" extra keys of vLLM >= 0.31.0 hash it with the name.
      const runtime = flight.runtime!;
      const path = runtime.config.loras.find((l) => l.name === parsed.model)?.path ??
        runtime.adapters.adapters().get(flight.loraName)?.path;
      if (path !== undefined) extraKeys.loraPath = path;
    }
    if (parsed.cacheSalt) extraKeys.cacheSalt = parsed.cacheSalt;
    return {
      now: this.#deps.now,
      random: this.#deps.random,
      policy: flight.selection!.policy,
      extraKeys,
      eligible,
      whole: goesWhole(parsed.endpoint, flight.runtime!),
      hashKeys: this.#requestWorkers &&
        ((scheme, tokens, extra) => this.#requestWorkers!.hash(scheme, tokens, extra)),
      // Refused before the keys are hashed and looked up: such work would be thrown away.
      checkPrompt: (prompt) => {
        refuseOverlongPrompt(flight.runtime!.config, prompt, parsed.prompt);
        if (flight.record.tenant) {
          this.#chargeTenant(flight, "prompt_tokens", prompt.promptTokens);
          this.#checkShare(flight, prompt.promptTokens);
        }
      },
    };
  }

  #eligible(flight: InFlight, parsed: ParsedRequest): PlanContext["eligible"] {
    if (!isInferenceEndpoint(parsed.endpoint)) return this.#servingRoute(flight);
    if (parsed.endpoint === "generate") return this.#servingGenerate(flight);
    if (parsed.previousResponseId !== undefined) {
      return this.#storedResponses.storing(flight.runtime!, parsed.previousResponseId);
    }
    return holdingAdapter(flight.runtime!, flight.loraName);
  }

  /** Takes a (re-)plan and its reservations over. */
  #adopt(flight: InFlight, planned: PlannedDispatch): void {
    flight.plan = planned.plan;
    flight.reservation = planned.reservation;
    flight.decodeReservation = planned.decodeReservation;
    flight.record.plan = planned.plan;
  }

  /**
   * Late binding (src/scheduling/late_binding.ts): an admitted request waits while no prefill
   * instance has room, or behind others held so (not behind requests admission refused: a
   * newcomer that fits goes past those). A local prefill is the decode instance's: never held.
   */
  #holds(flight: InFlight, plan: DispatchPlan): boolean {
    const { holdAboveTokens } = flight.runtime!.config.slo.queue;
    const othersHeld = this.#held.get(flight.runtime!.config.name) ?? 0;
    return holdsOnArrival(heldCandidates(plan), holdAboveTokens, othersHeld);
  }

  /**
   * A refused request waits when an idle instance could still serve it within the TTFT SLO
   * (src/scheduling/queue_rules.ts); an admitted one goes, even past those waiting: they did not
   * fit at their last re-plan, and a newcomer that waited behind them only lost goodput in the
   * simulator (docs/sim/queue/README.md).
   */
  #worthWaiting(flight: InFlight, plan: DispatchPlan, refusal: AdmissionRefusal): boolean {
    const idle = idleTtftS(plan.inputs.request, plan.candidates, plan.policy.ttftParams);
    return refusal.status === 429 && worthQueueing(idle, flight.runtime!.config.slo.ttftS);
  }

  /** The wait in the queue; a response when it ended other than admitted (then: flight.plan). */
  async #waitInQueue(
    flight: InFlight,
    parsed: ParsedRequest,
    refusal: AdmissionRefusal,
    wait: { priority: number; ttlS: number; cause: QueueRecord["cause"] },
  ): Promise<Response | undefined> {
    const model = flight.runtime!.config.name;
    const queue = flight.runtime!.config.slo.queue;
    flight.lastRefusal = refusal;
    this.#release(flight);
    const started = this.#deps.now();
    const arrival = { arrivedMs: flight.record.startedAt, joinedMs: started };
    const outcome = await this.#flow.wait(model, queue, {
      priority: wait.priority,
      tenant: flight.record.tenant ?? "",
      weight: this.#tenants.weightOf(flight.record.tenant),
      promptTokens: flight.plan!.promptTokens,
      deadlineMs: waitDeadlineMs(arrival, wait.ttlS, flight.runtime!.config.slo.ttftS),
      signal: flight.client.signal,
      replan: () => this.#replan(flight, parsed, refusal.reason),
    });
    flight.queueSettled = true;
    // A re-plan that was admitted as the wait ended otherwise (drained, left) holds nothing.
    if (outcome.kind !== "admitted") this.#release(flight);
    const ended = this.#deps.now();
    const waitedS = (ended - started) / 1000;
    const record: QueueRecord = {
      priority: wait.priority,
      waitedS,
      result: outcome.kind,
      cause: wait.cause,
    };
    flight.record.queue = record;
    flight.trace.queued?.(record, started, ended);
    switch (outcome.kind) {
      case "admitted":
        flight.trace.planned(flight.plan!, flight.record);
        return undefined;
      case "aborted":
        return this.#clientLeft(flight);
      case "failed":
        throw outcome.error;
      default: {
        const context = { model, queue, waitedS, lastRefusal: flight.lastRefusal! };
        const { error, retryAfterS } = queueRefusal(outcome, context);
        record.code = String(error.options.code);
        flight.responseHeaders.set("retry-after", String(retryAfterS));
        return this.#answer(flight, error, "rejected");
      }
    }
  }

  /** A client that left while its request waited: nothing was sent anywhere. */
  #clientLeft(flight: InFlight): Response {
    const { record } = flight;
    record.outcome = "client_aborted";
    record.status = 499;
    record.durationS = (this.#deps.now() - record.startedAt) / 1000;
    this.#finish(flight.trace, record);
    return new Response(null, { status: 499, headers: flight.responseHeaders });
  }

  /**
   * Plans a waiting request again, with the model's config as it is now (the prompt tokenized
   * again only when a reload replaced the runtime); true when admitted within what is left of the
   * TTFT SLO after its wait, the plan and reservations then its; `refusedFor`, why it was queued.
   */
  async #replan(
    flight: InFlight,
    parsed: ParsedRequest,
    refusedFor: AdmissionRefusal["reason"],
  ): Promise<boolean> {
    const model = flight.record.model;
    const runtime = this.#registry.resolve(model)?.runtime;
    if (!runtime) throw this.#registry.unknownModel(model);
    flight.runtime = runtime;
    const { slo } = runtime.config;
    let goes = false;
    // Charged once: a re-plan checks only the (possibly reloaded) prompt limits.
    const context = {
      ...this.#planContext(flight, parsed),
      checkPrompt: (prompt: { tokens?: number[]; promptTokens: number }) =>
        refuseOverlongPrompt(runtime.config, prompt, parsed.prompt),
      reserveIf: (plan: DispatchPlan) => {
        const sinceArrivalS = (this.#deps.now() - flight.record.startedAt) / 1000;
        const chosen = chosenPrefill(plan);
        goes = plan.admission.admit &&
          admitsFromQueue(slo.queue.admitWhen, chosen, sinceArrivalS, slo.ttftS, refusedFor) &&
          !holdsOnArrival(heldCandidates(plan), slo.queue.holdAboveTokens, 0);
        return goes;
      },
    };
    if (runtime !== flight.prepared!.runtime) {
      flight.prepared = await preparePrompt(runtime, parsed, context);
    }
    const planned = await decideDispatch(flight.prepared!, parsed, context);
    const verdict = planned.plan.admission;
    if (!verdict.admit) flight.lastRefusal = verdict;
    if (!goes || flight.client.signal?.aborted || flight.queueSettled) {
      planned.reservation?.cancel();
      planned.decodeReservation?.cancel();
      return false;
    }
    this.#adopt(flight, planned);
    return true;
  }

  /** Gives a plan's reservations back (a request that waits holds none). */
  #release(flight: InFlight): void {
    flight.reservation?.cancel();
    flight.decodeReservation?.cancel();
    flight.reservation = flight.decodeReservation = undefined;
  }

  /** Which instances may take a load-routed request; 404 when every one lacks its path. */
  #servingRoute(
    flight: InFlight,
    instances = flight.runtime!.cluster.entries().map((e) => e.config.id),
  ): (instanceId: string) => boolean {
    const model = flight.runtime!.config.name;
    const now = this.#deps.now();
    const among = new Set(instances);
    const serves = (id: string) =>
      among.has(id) && this.#routeSupport.serves(model, id, flight.path, now);
    if (instances.length > 0 && !instances.some(serves)) {
      throw new HttpError(
        404,
        `No instance of model '${model}' serves ${flight.path} (each answered 404 lately)`,
        { code: "route_not_served" },
      );
    }
    return serves;
  }

  /** SGLang's /generate goes to the model's SGLang engines that serve it; 404 when none does. */
  #servingGenerate(flight: InFlight): (instanceId: string) => boolean {
    const model = flight.runtime!.config.name;
    const sglang = new Set(
      flight.runtime!.cluster.entries()
        .filter((e) => e.config.engine === "sglang")
        .map((e) => e.config.id),
    );
    if (sglang.size === 0) {
      throw new HttpError(
        404,
        `Model '${model}' has no SGLang engine: /generate is SGLang's native API`,
        { code: "route_not_served" },
      );
    }
    return this.#servingRoute(flight, [...sglang]);
  }

  /** `GET /v1/responses/{id}` and `POST .../cancel`: relayed to the engine that stored it. */
  handleStoredResponse(
    request: Request,
    responseId: string,
    action: "retrieve" | "cancel",
  ): Promise<Response> {
    return this.#storedResponses.relay(request, responseId, action);
  }

  /**
   * What goes to the engine, in one copy: the client's end-to-end headers less the router's own
   * and those meant for the router alone (operator override), with the client's address in the
   * forwarding headers (src/proxy/forwarding_headers.ts).
   */
  #upstreamHeaders(flight: InFlight): Headers {
    const headers = upstreamHeaders(flight.request.headers);
    for (const name of flight.selection?.privateHeaders ?? []) headers.delete(name);
    setForwardingHeaders(
      headers,
      flight.client.address,
      (peer) => this.#trustedProxies.allows(peer),
    );
    return headers;
  }

  /** A failure before any upstream answer: the client's fault (HttpError) or the router's. */
  #failed(flight: InFlight, error: unknown): Response {
    // Whatever threw after planning, the reserved load and predicted KV go back.
    this.#release(flight);
    if (error instanceof RateLimitedError || error instanceof FairShareError) {
      return this.#answer(flight, error, "rejected");
    }
    if (error instanceof HttpError) return this.#answer(flight, error, "client_error");
    this.#deps.log("request failed inside the router", {
      level: "error",
      requestId: flight.record.requestId,
      error: (error as Error)?.stack ?? String(error),
    });
    const internal = new HttpError(
      500,
      `Internal router error: ${(error as Error)?.message ?? error}`,
      { code: "internal_error" },
    );
    return this.#answer(flight, internal, "internal_error");
  }

  #answer(flight: InFlight, error: HttpError, outcome: RequestRecord["outcome"]): Response {
    const { record } = flight;
    record.status = error.status;
    record.outcome = outcome;
    record.error = error.message;
    record.durationS = (this.#deps.now() - record.startedAt) / 1000;
    this.#finish(flight.trace, record);
    return errorAnswerFor(record.endpoint)(error, flight.responseHeaders);
  }

  /** Charges the request's tenant; a refusal is recorded and thrown (answered by #failed). */
  #chargeTenant(flight: InFlight, kind: "requests" | "prompt_tokens", cost: number): void {
    try {
      this.#tenants.charge(flight.record.tenant!, kind, cost, flight.responseHeaders);
    } catch (error) {
      if (error instanceof RateLimitedError) flight.record.rateLimited = kind;
      throw error;
    }
  }

  /** Refuses a tenant over its share of the model's admitted work while the model sheds load. */
  #checkShare(flight: InFlight, tokens: number): void {
    try {
      this.#tenants.checkShare(flight.runtime!.config.name, flight.record.tenant!, tokens);
    } catch (error) {
      if (error instanceof FairShareError) flight.record.rateLimited = "fair_share";
      throw error;
    }
  }

  /** Past `limits.maxConcurrentRequests`: a cheap 503 instead of one more request to carry. */
  #overloaded(flight: InFlight): Response {
    flight.record.model = "unknown";
    flight.responseHeaders.set("retry-after", "1");
    const limit = this.#config.limits.maxConcurrentRequests;
    const error = new HttpError(
      503,
      `The router is already serving its limit of ${limit} concurrent requests; retry shortly.`,
      { code: "router_overloaded" },
    );
    return this.#answer(flight, error, "rejected");
  }

  /**
   * Wakes the model's flow-control queue whenever a prefill on one of its instances ends (a lease's
   * first token: a stream's first token, a whole answer's end, a prefill leg's answer), so a request
   * that waits may go before the one ahead of it ends. Called for every runtime built.
   */
  wakeOnPrefillEnds(runtime: ModelRuntime): void {
    const model = runtime.config.name;
    runtime.cluster.account.observe({
      leased() {},
      released() {},
      firstToken: (lease) => {
        if (lease.prefillTokens > 0) this.#flow.wake(model);
      },
    });
  }

  /** Ends the trace and tells every observer; an observer that throws is logged, not fatal. */
  #finish(trace: RequestTrace, record: RequestRecord): void {
    if (this.#inFlightRecords.delete(record)) this.#inFlight--;
    this.#shares.get(record)?.();
    // Its load is given back: whoever waits for the model may fit now.
    if (record.plan?.admission.admit) this.#flow.wake(record.model);
    try {
      trace.finish(record);
    } catch (error) {
      this.#deps.log("request trace failed", { level: "error", error: (error as Error).message });
    }
    for (const observer of this.#observers) {
      try {
        observer.onFinished(record);
      } catch (error) {
        this.#deps.log("request observer failed", {
          level: "error",
          error: (error as Error).message,
        });
      }
    }
  }
}

/**
 * Whether a request goes whole to one instance on a disaggregated model: the P/D protocols split
 * OpenAI completions and chats, and SGLang's own protocol /generate too; every other body goes
 * whole.
 */
function goesWhole(endpoint: Endpoint, runtime: ModelRuntime): boolean {
  if (endpoint === "completions" || endpoint === "chat") return false;
  return endpoint !== "generate" || runtime.config.disaggregation?.protocol !== "sglang";
}

function hasSglangEngines(model: Config["models"][number]): boolean {
  return model.instances.some((i) => i.engine === "sglang") ||
    model.discovery.some((d) => d.engine === "sglang");
}

/** A load-routed request's path and query, as the client sent them. */
function pathOf(request: Request): string {
  const url = new URL(request.url);
  return url.pathname + url.search;
}

/** The prefill candidates late binding judges; none for a local prefill (never held). */
function heldCandidates(plan: DispatchPlan): DispatchPlan["candidates"] {
  return plan.decode?.localPrefill?.local ? [] : plan.candidates;
}

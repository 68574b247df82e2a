import client from "prom-client";
import { KV_AGREEMENT_STATES } from "../kv/kv_agreement.ts";

/** Seconds buckets from 5 ms to 2 minutes: TTFT spans cached chat turns to 128k-token prefills. */
const LATENCY_BUCKETS = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  20,
  30,
  60,
  120,
];
/** Router overhead per stage is measured in microseconds to milliseconds. */
const STAGE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5];
const INTER_TOKEN_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2];

/** Per-instance state read at scrape time (health, breaker, load) rather than pushed. */
export interface InstanceGaugeSample {
  model: string;
  instance: string;
  healthy: boolean;
  breakerState: string;
  inflightPrefillTokens: number;
  inflightPrefillRequests: number;
  inflightDecodeRequests: number;
  estimatedWaitingPrefillTokens: number;
  reportedWaitingRequests?: number;
  reportedRunningRequests?: number;
  reportedPendingTokens?: number;
  reportAgeSeconds?: number;
  reportStale?: boolean;
  probeFailures: number;
  draining: boolean;
  /** Predicted hits against the engine's reuse: unknown, agree, overpredicts or blind. */
  kvAgreement?: string;
  /** The mirror of the engine's own cache from its KV events (absent without `kvEvents`). */
  engineMirror?: {
    exact: boolean;
    gaps: number;
    restarts: number;
    disconnects: number;
    resyncFailed: number;
  };
}

export interface ModelGaugeSample {
  model: string;
  storeDown: boolean;
  expiredLeases: number;
  predictedIndexKeys: number;
  /** Discovered instances refused (credentials in the URL, host outside the allow-list). */
  discoveryRefused?: number;
  /** The model's tokenizer worker pool (absent: tokenized on the main loop). */
  tokenizerWorkers?: { started: number; ready: number; replaced: number };
  /** The mirror of the master's KV events (absent without `kv.masterEvents`). */
  poolMirror?: {
    exact: boolean;
    keys: number;
    answered: number;
    keysAgreed: number;
    keysDisagreed: number;
    snapshots: number;
    gaps: number;
  };
  /** Engines whose own cache is mirrored from their KV events, and how many are exact now. */
  engineMirrors?: { configured: number; exact: number };
}

/** Router-wide gauges: requests in flight; the shared state between replicas (absent without). */
export interface RouterGaugeSample {
  /** Requests the router is carrying: the count `limits.maxConcurrentRequests` bounds. */
  inFlight?: number;
  /** Requests waiting in the flow-control queues, per model and band. */
  queues?: Map<string, Map<number, number>>;
  /** Open client connections: the count `limits.maxConnections` bounds (node listener only). */
  openConnections?: number;
  sharedState?: {
    published: number;
    received: number;
    errors: number;
    rejected: number;
    snapshots: number;
    remoteLeases: number;
    lostEnds: number;
    lostLeases: number;
    silentReplicas: number;
  };
}

const BREAKER_STATES = ["closed", "open", "half_open", "starting"];

/**
 * Every series the router exposes on `/metrics`, in one registry owned by the router instance
 * (no global default registry: two routers in one process, as in tests, do not collide).
 */
export class GatewayMetrics {
  readonly registry = new client.Registry();
  readonly requests;
  readonly ttft;
  readonly e2e;
  readonly interToken;
  readonly promptTokens;
  readonly completionTokens;
  readonly predictedHitTokens;
  readonly engineCachedTokens;
  readonly engineReportedPromptTokens;
  readonly pdLegs;
  readonly localPrefills;
  readonly queueExits;
  readonly queueWait;
  readonly hitMismatchTokens;
  readonly retries;
  readonly rejections;
  readonly storeLookups;
  readonly storeLookupSeconds;
  readonly stageSeconds;
  readonly tokenizerFailures;
  readonly armChanges;
  readonly reloads;
  readonly kvLoadOnlyDispatches;
  readonly tenantRequests;
  readonly eventLoopLag;

  constructor(
    instanceSamples: () => InstanceGaugeSample[] = () => [],
    modelSamples: () => ModelGaugeSample[] = () => [],
    routerSamples: () => RouterGaugeSample = () => ({}),
  ) {
    const registers = [this.registry];
    const base = ["model", "instance", "arm"] as const;
    this.requests = new client.Counter({
      name: "tidegate_requests_total",
      help: "Requests by outcome and HTTP status.",
      labelNames: [...base, "endpoint", "outcome", "status"],
      registers,
    });
    this.ttft = new client.Histogram({
      name: "tidegate_ttft_seconds",
      help: "Time from request arrival to the first response byte from the engine.",
      labelNames: base,
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.e2e = new client.Histogram({
      name: "tidegate_request_duration_seconds",
      help: "Time from request arrival to the end of the response.",
      labelNames: base,
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.interToken = new client.Histogram({
      name: "tidegate_inter_token_seconds",
      help: "Gaps between streamed chunks after the first (inter-token latency).",
      labelNames: base,
      buckets: INTER_TOKEN_BUCKETS,
      registers,
    });
    this.promptTokens = new client.Counter({
      name: "tidegate_prompt_tokens_total",
      help: "Prompt tokens dispatched (router's tokenization).",
      labelNames: base,
      registers,
    });
    this.completionTokens = new client.Counter({
      name: "tidegate_completion_tokens_total",
      help: "Completion tokens reported by the engines' usage.",
      labelNames: base,
      registers,
    });
    this.predictedHitTokens = new client.Counter({
      name: "tidegate_predicted_hit_tokens_total",
      help: "Prompt tokens predicted cached for the chosen instance (local) and in the pool.",
      labelNames: [...base, "scope"],
      registers,
    });
    this.engineCachedTokens = new client.Counter({
      name: "tidegate_engine_cached_tokens_total",
      help: "Cached prompt tokens the engine reported (usage.prompt_tokens_details.cached_tokens).",
      labelNames: base,
      registers,
    });
    this.engineReportedPromptTokens = new client.Counter({
      name: "tidegate_engine_reported_prompt_tokens_total",
      help: "Prompt tokens of the requests whose engine reported cached tokens: the engine hit " +
        "ratio is tidegate_engine_cached_tokens_total over this.",
      labelNames: base,
      registers,
    });
    this.pdLegs = new client.Counter({
      name: "tidegate_pd_legs_total",
      help: "Upstream attempts of disaggregated requests by leg (prefill, decode) and result " +
        "(ok, or the failure that made the router retry).",
      labelNames: ["model", "instance", "role", "result"],
      registers,
    });
    this.localPrefills = new client.Counter({
      name: "tidegate_pd_local_prefills_total",
      help: "Conditional disaggregation's verdicts (disaggregation.localPrefill) by result " +
        "(local: prefilled on the decode instance; remote) and reason.",
      labelNames: ["model", "result", "reason"],
      registers,
    });
    this.queueExits = new client.Counter({
      name: "tidegate_queue_exits_total",
      help:
        "Requests that left the flow-control queue (slo.queue) by band (priority) and result: " +
        "admitted, full, pushed_out (by a more urgent request), expired (429 queue_timeout), " +
        "aborted, shutting_down, failed; cause: refused (by admission: it waited to fit) or held " +
        "(admitted, held by late binding, slo.queue.holdAboveTokens).",
      labelNames: ["model", "priority", "cause", "result"],
      registers,
    });
    this.queueWait = new client.Histogram({
      name: "tidegate_queue_wait_seconds",
      help: "Time requests waited in the flow-control queue, by band (priority) and cause " +
        "(refused by admission, or held by late binding).",
      labelNames: ["model", "priority", "cause"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.hitMismatchTokens = new client.Counter({
      name: "tidegate_hit_mismatch_tokens_total",
      help:
        "|predicted hit - engine-reported cached tokens|: a silent key mismatch detector (the " +
        "hit: the instance's own prefix, or with kv.poolLoads the store's if longer).",
      labelNames: base,
      registers,
    });
    this.retries = new client.Counter({
      name: "tidegate_upstream_retries_total",
      help: "Upstream attempts that failed before any byte and were retried elsewhere.",
      labelNames: ["model", "instance", "reason"],
      registers,
    });
    this.rejections = new client.Counter({
      name: "tidegate_admission_rejections_total",
      help: "Requests answered 429 because the predicted TTFT/TBT broke the SLO, or refused by " +
        "the flow-control queue (queue_full, queue_timeout; router_shutting_down is a 503).",
      labelNames: ["model", "arm", "reason"],
      registers,
    });
    this.storeLookups = new client.Counter({
      name: "tidegate_store_lookups_total",
      help:
        "KV store lookups by outcome (ok, mirror: answered by the pool mirror, deadline, failed, store_down, skipped).",
      labelNames: ["model", "outcome"],
      registers,
    });
    this.storeLookupSeconds = new client.Histogram({
      name: "tidegate_store_lookup_seconds",
      help: "Time spent on the KV store lookup.",
      labelNames: ["model", "outcome"],
      buckets: STAGE_BUCKETS,
      registers,
    });
    this.stageSeconds = new client.Histogram({
      name: "tidegate_stage_seconds",
      help: "Router overhead per stage before dispatch (tokenize, hash, lookup, schedule).",
      labelNames: ["model", "stage"],
      buckets: STAGE_BUCKETS,
      registers,
    });
    this.tokenizerFailures = new client.Counter({
      name: "tidegate_tokenizer_failures_total",
      help: "Requests whose prompt could not be tokenized (dispatched by load only).",
      labelNames: ["model"],
      registers,
    });
    this.armChanges = new client.Counter({
      name: "tidegate_experiment_changes_total",
      help: "Runtime changes of experiment arms (admin API or reload).",
      labelNames: ["model"],
      registers,
    });

    this.reloads = new client.Counter({
      name: "tidegate_config_reloads_total",
      help: "Config reloads (file change, SIGHUP): applied, or rejected with the old config kept.",
      labelNames: ["outcome"],
      registers,
    });

    this.kvLoadOnlyDispatches = new client.Counter({
      name: "tidegate_kv_load_only_dispatches_total",
      help: "Requests dispatched by load alone because an instance's KV agreement is blind " +
        '(kv.onDisagreement: "load_only").',
      labelNames: ["model"],
      registers,
    });

    this.eventLoopLag = new client.Histogram({
      name: "tidegate_event_loop_lag_seconds",
      help: "How late the main loop ran a timer due every 20 ms (500 ms while the process " +
        "is idle): time it was held by one step (or starved of CPU). Requests wait at least " +
        "this long.",
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });

    this.tenantRequests = new client.Counter({
      name: "tidegate_tenant_requests_total",
      help: 'Requests per configured tenant ("other": clients no tenant matches), by whether ' +
        "its rate limits admitted them.",
      labelNames: ["tenant", "result"],
      registers,
    });

    new client.Gauge({
      name: "tidegate_requests_in_flight",
      help: "Requests the router is carrying (tokenizing, waiting for an engine, streaming): " +
        "past limits.maxConcurrentRequests the next one gets 503 router_overloaded.",
      registers,
      collect() {
        this.set(routerSamples().inFlight ?? 0);
      },
    });

    new client.Gauge({
      name: "tidegate_queue_waiting",
      help: "Requests waiting in the flow-control queue (slo.queue), by model and band (priority).",
      labelNames: ["model", "priority"],
      registers,
      collect() {
        this.reset();
        for (const [model, bands] of routerSamples().queues ?? []) {
          for (const [priority, waiting] of bands) this.set({ model, priority }, waiting);
        }
      },
    });

    new client.Gauge({
      name: "tidegate_client_connections",
      help: "Open client connections: past limits.maxConnections a new one gets 503 " +
        "router_overloaded (listen.server deno does not count them: 0).",
      registers,
      collect() {
        this.set(routerSamples().openConnections ?? 0);
      },
    });

    declareInstanceGauges(registers, instanceSamples);
    declareAgreementGauge(registers, instanceSamples);
    declareHealthGauges(registers, instanceSamples);
    declareModelGauges(registers, modelSamples);
    declareSharedStateGauges(registers, routerSamples);
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

/** Per-instance load gauges, read from the live runtimes at scrape time. */
function declareInstanceGauges(
  registers: client.Registry[],
  instanceSamples: () => InstanceGaugeSample[],
): void {
  const instanceGauge = (
    name: string,
    help: string,
    read: (s: InstanceGaugeSample) => number | undefined,
  ) =>
    new client.Gauge({
      name,
      help,
      labelNames: ["model", "instance"],
      registers,
      collect() {
        this.reset();
        for (const sample of instanceSamples()) {
          const value = read(sample);
          if (value !== undefined) {
            this.set({ model: sample.model, instance: sample.instance }, value);
          }
        }
      },
    });
  instanceGauge(
    "tidegate_instance_healthy",
    "1 when the instance takes traffic.",
    (s) => (s.healthy ? 1 : 0),
  );
  instanceGauge(
    "tidegate_instance_draining",
    "1 while the instance is drained.",
    (s) => (s.draining ? 1 : 0),
  );
  instanceGauge(
    "tidegate_instance_inflight_prefill_tokens",
    "Uncomputed prefill tokens the router dispatched that have no first token yet.",
    (s) => s.inflightPrefillTokens,
  );
  instanceGauge(
    "tidegate_instance_inflight_prefill_requests",
    "Requests dispatched by this router that have no first token yet.",
    (s) => s.inflightPrefillRequests,
  );
  instanceGauge(
    "tidegate_instance_inflight_decode_requests",
    "Requests dispatched by this router that are decoding.",
    (s) => s.inflightDecodeRequests,
  );
  instanceGauge(
    "tidegate_instance_waiting_prefill_tokens",
    "The waiting-prefill estimate the policies see (account reconciled with engine reports).",
    (s) => s.estimatedWaitingPrefillTokens,
  );
  instanceGauge(
    "tidegate_instance_reported_waiting_requests",
    "Waiting requests the engine reported (vLLM num_requests_waiting, SGLang num_waiting_reqs).",
    (s) => s.reportedWaitingRequests,
  );
  instanceGauge(
    "tidegate_instance_reported_running_requests",
    "Running requests the engine reported.",
    (s) => s.reportedRunningRequests,
  );
  instanceGauge(
    "tidegate_instance_reported_pending_tokens",
    "Pending prefill tokens the engine reported (SGLang num_pending_tokens).",
    (s) => s.reportedPendingTokens,
  );
  instanceGauge(
    "tidegate_instance_report_age_seconds",
    "Age of the engine's last load report (reconciliation lag).",
    (s) => s.reportAgeSeconds,
  );
  instanceGauge(
    "tidegate_instance_report_stale",
    "1 when the engine's last load report is too old to use.",
    (s) => (s.reportStale === undefined ? undefined : s.reportStale ? 1 : 0),
  );
  declareEngineMirrorGauges(instanceGauge);
}

/** Per-instance state of the engines' KV event mirrors (only instances with `kvEvents`). */
function declareEngineMirrorGauges(
  instanceGauge: (
    name: string,
    help: string,
    read: (s: InstanceGaugeSample) => number | undefined,
  ) => unknown,
): void {
  instanceGauge(
    "tidegate_engine_mirror_exact",
    "1 while the mirror of the engine's cache from its KV events is exact.",
    (s) => (s.engineMirror === undefined ? undefined : s.engineMirror.exact ? 1 : 0),
  );
  const counters = [
    ["gaps", "gaps", "Sequence gaps in the engine's KV events (lost messages)"],
    ["restarts", "restarts", "Times the engine's publisher was found restarted (mirror emptied)"],
    ["disconnects", "disconnects", "Connections to the engine's KV event publisher lost"],
    ["resyncs_failed", "resyncFailed", "Replays that could not make the engine's mirror whole"],
  ] as const;
  for (const [suffix, field, help] of counters) {
    instanceGauge(
      `tidegate_engine_mirror_${suffix}`,
      `${help}, since start.`,
      (s) => s.engineMirror?.[field],
    );
  }
}

/** Per-instance KV agreement (1 for the current state), read at scrape time. */
function declareAgreementGauge(
  registers: client.Registry[],
  instanceSamples: () => InstanceGaugeSample[],
): void {
  new client.Gauge({
    name: "tidegate_kv_agreement",
    help: "Router's predicted KV hits against the engine's reported reuse per instance " +
      "(1 for the current state: unknown, agree, overpredicts, blind).",
    labelNames: ["model", "instance", "state"],
    registers,
    collect() {
      this.reset();
      for (const sample of instanceSamples()) {
        for (const state of KV_AGREEMENT_STATES) {
          const labels = { model: sample.model, instance: sample.instance, state };
          this.set(labels, (sample.kvAgreement ?? "unknown") === state ? 1 : 0);
        }
      }
    },
  });
}

/** Per-instance health series: probe failures and breaker state. */
function declareHealthGauges(
  registers: client.Registry[],
  instanceSamples: () => InstanceGaugeSample[],
): void {
  // A counter read from the prober's tally at scrape time (it restarts if the instance leaves
  // and comes back, which Prometheus treats as a counter reset).
  new client.Counter({
    name: "tidegate_instance_probe_failures_total",
    help: "Failed health probes of the instance since it joined.",
    labelNames: ["model", "instance"],
    registers,
    collect() {
      this.reset();
      for (const sample of instanceSamples()) {
        this.inc({ model: sample.model, instance: sample.instance }, sample.probeFailures);
      }
    },
  });
  new client.Gauge({
    name: "tidegate_instance_breaker_state",
    help: "Circuit breaker state per instance (1 for the current state).",
    labelNames: ["model", "instance", "state"],
    registers,
    collect() {
      this.reset();
      for (const sample of instanceSamples()) {
        for (const state of BREAKER_STATES) {
          this.set(
            { model: sample.model, instance: sample.instance, state },
            sample.breakerState === state ? 1 : 0,
          );
        }
      }
    },
  });
}

/** Per-model gauges: the store's health, lease expiries, tokenizer workers, predictions. */
function declareModelGauges(
  registers: client.Registry[],
  modelSamples: () => ModelGaugeSample[],
): void {
  const modelGauge = (name: string, help: string, read: (s: ModelGaugeSample) => number) =>
    new client.Gauge({
      name,
      help,
      labelNames: ["model"],
      registers,
      collect() {
        this.reset();
        for (const sample of modelSamples()) this.set({ model: sample.model }, read(sample));
      },
    });
  modelGauge(
    "tidegate_store_down",
    "1 while the KV store is in its down-window.",
    (s) => (s.storeDown ? 1 : 0),
  );
  modelGauge(
    "tidegate_load_leases_expired",
    "Dispatch-time load entries dropped because no first token came in time.",
    (s) => s.expiredLeases,
  );
  modelGauge(
    "tidegate_discovery_refused_instances",
    "Discovered instances skipped: URL with credentials, or host outside admin.allowedInstanceHosts.",
    (s) => s.discoveryRefused ?? 0,
  );
  modelGauge(
    "tidegate_tokenizer_workers",
    "Tokenizer workers started (they start with the first long prompt; 0 without a pool).",
    (s) => s.tokenizerWorkers?.started ?? 0,
  );
  modelGauge(
    "tidegate_tokenizer_workers_ready",
    "Tokenizer workers that have loaded their tokenizer and take work.",
    (s) => s.tokenizerWorkers?.ready ?? 0,
  );
  modelGauge(
    "tidegate_tokenizer_workers_replaced",
    "Tokenizer workers replaced after a crash, a missed deadline or a failed load.",
    (s) => s.tokenizerWorkers?.replaced ?? 0,
  );
  modelGauge(
    "tidegate_pool_mirror_exact",
    "1 while the mirror of the master's KV events is exact (requests then skip the lookup).",
    (s) => (s.poolMirror?.exact ? 1 : 0),
  );
  modelGauge(
    "tidegate_pool_mirror_keys",
    "Keys in the mirror of the master's KV events.",
    (s) => s.poolMirror?.keys ?? 0,
  );
  modelGauge(
    "tidegate_pool_mirror_answers",
    "Requests answered from the pool mirror instead of a store lookup (since start).",
    (s) => s.poolMirror?.answered ?? 0,
  );
  modelGauge(
    "tidegate_pool_mirror_keys_agreed",
    "Keys of sampled requests on which the master's lookup agreed with the mirror.",
    (s) => s.poolMirror?.keysAgreed ?? 0,
  );
  modelGauge(
    "tidegate_pool_mirror_keys_disagreed",
    "Keys of sampled requests on which the master's lookup disagreed with the mirror.",
    (s) => s.poolMirror?.keysDisagreed ?? 0,
  );
  modelGauge(
    "tidegate_pool_mirror_snapshots",
    "Times the pool mirror was rebuilt from the master's keys (connects, gaps, retries).",
    (s) => s.poolMirror?.snapshots ?? 0,
  );
  modelGauge(
    "tidegate_pool_mirror_gaps",
    "Sequence gaps in the master's KV events (lost messages).",
    (s) => s.poolMirror?.gaps ?? 0,
  );
  modelGauge(
    "tidegate_engine_mirrors_exact",
    "Instances whose engine cache mirror (from its KV events) is exact now.",
    (s) => s.engineMirrors?.exact ?? 0,
  );
  modelGauge(
    "tidegate_predicted_index_keys",
    "Keys in the local predicted index (recent dispatches not yet visible in the store).",
    (s) => s.predictedIndexKeys,
  );
}

/** Router-wide gauges of the shared state between replicas (0 without it). */
function declareSharedStateGauges(
  registers: client.Registry[],
  routerSamples: () => RouterGaugeSample,
): void {
  const sharedGauge = (
    name: string,
    help: string,
    read: (s: NonNullable<RouterGaugeSample["sharedState"]>) => number,
  ) =>
    new client.Gauge({
      name,
      help,
      registers,
      collect() {
        const shared = routerSamples().sharedState;
        this.set(shared ? read(shared) : 0);
      },
    });
  sharedGauge(
    "tidegate_shared_state_facts_published",
    "Dispatch facts (leases, first tokens, ends, predicted keys) published to the other replicas.",
    (s) => s.published,
  );
  sharedGauge(
    "tidegate_shared_state_batches_received",
    "Fact batches received from other replicas and applied.",
    (s) => s.received,
  );
  sharedGauge(
    "tidegate_shared_state_errors",
    "Publishes or subscriptions that failed (the replica then keeps its own view).",
    (s) => s.errors,
  );
  sharedGauge(
    "tidegate_shared_state_remote_leases",
    "Other replicas' in-flight leases counted in this replica's load account.",
    (s) => s.remoteLeases,
  );
  sharedGauge(
    "tidegate_shared_state_snapshots_published",
    "Snapshot parts (live leases by id range, the heartbeat) published to the other replicas.",
    (s) => s.snapshots,
  );
  sharedGauge(
    "tidegate_shared_state_lost_ends_repaired",
    "Other replicas' leases released because their snapshot no longer listed them (a lost end).",
    (s) => s.lostEnds,
  );
  sharedGauge(
    "tidegate_shared_state_lost_leases_recovered",
    "Other replicas' leases taken from their snapshot because the lease itself was never heard.",
    (s) => s.lostLeases,
  );
  sharedGauge(
    "tidegate_shared_state_silent_replicas",
    "Replicas not heard from for silentAfterMs, whose leases were all released.",
    (s) => s.silentReplicas,
  );
}

import type { ModelConfig } from "../config/schema.ts";
import { AdapterCatalog } from "../cluster/adapter_catalog.ts";
import { masterUrls } from "../config/kv_masters.ts";
import { DecodeOutlook } from "../cluster/decode_outlook.ts";
import { ModelCluster } from "../cluster/model_cluster.ts";
import type { Timers } from "../cluster/timers.ts";
import { createKeyScheme, describeSeed, keySchemeOptionsFromKv } from "../hashing/key_scheme.ts";
import type { KeyScheme } from "../hashing/types.ts";
import { MooncakeClient } from "../kv/mooncake_client.ts";
import { BootstrapEngineIds } from "../proxy/mooncake_bootstrap.ts";
import { rankLoadsReader } from "../cluster/rank_loads.ts";
import { KvAgreementMonitor } from "./kv_agreement_monitor.ts";
import { PredictedIndex } from "../kv/predicted_index.ts";
import { EngineCaches } from "../kv/events/engine_caches.ts";
import { PoolMirror } from "../kv/events/pool_mirror.ts";
import { RecentPrompts } from "../kv/recent_prompts.ts";
import { StoreHealth } from "../kv/store_health.ts";
import { PrefillModelEstimator } from "../scheduling/prefill_model.ts";
import { buildPolicy, type NamedPolicy } from "../scheduling/named_policy.ts";
import type { TtftModelParams } from "../scheduling/ttft_estimate.ts";
import { EngineTokenizer } from "../tokenize/engine_tokenizer.ts";
import { TokenizeFailureLog } from "../tokenize/failure_log.ts";
import { untracedFetch } from "../telemetry/tracing.ts";
import { loadTokenizer } from "../tokenize/load_tokenizer.ts";
import type { LoadedTokenizer } from "../tokenize/local_tokenizer.ts";
import { LocalAsyncTokenizer } from "../tokenize/local_async_tokenizer.ts";
import { NoneTokenizer } from "../tokenize/none_tokenizer.ts";
import { PooledAsyncTokenizer } from "../tokenize/pooled_async_tokenizer.ts";
import type { TokenizerPools } from "../tokenize/tokenizer_pools.ts";
import type { AsyncPromptTokenizer } from "../tokenize/types.ts";
import type { TokenizerSpec } from "../tokenize/worker_protocol.ts";

export interface RuntimeDeps {
  fetch: typeof fetch;
  /** The store lookups' HTTP client (default `fetch`). */
  masterFetch?: typeof fetch;
  /** Monotonic milliseconds. */
  now: () => number;
  random: () => number;
  timers?: Timers;
  log: (message: string, fields?: Record<string, unknown>) => void;
  /** Called on every tokenizer failure (metrics); the log line is written once per outage. */
  onTokenizerFailure?: (model: string) => void;
  /** Tokenizers already loaded, by directory: a reload reuses them instead of parsing again. */
  tokenizerCache?: Map<string, Promise<LoadedTokenizer>>;
  /** Worker pools that tokenize long prompts off the main loop (absent: inline). */
  tokenizerPools?: TokenizerPools;
  /** The config file the router runs from, named in the commands its log lines suggest. */
  configPath?: string;
}

/**
 * Everything one model needs per request, built once from config: tokenizer, key scheme, KV
 * index (store + predicted index), the instance cluster and the default policy.
 */
export class ModelRuntime {
  readonly config: ModelConfig;
  readonly tokenizer: AsyncPromptTokenizer;
  readonly tokenizerFailures: TokenizeFailureLog;
  readonly localTokenizer?: LoadedTokenizer;
  readonly keyScheme: KeyScheme;
  readonly store?: MooncakeClient;
  readonly predicted?: PredictedIndex;
  readonly cluster: ModelCluster;
  readonly defaultPolicy: NamedPolicy;
  /** Online prefill-time models per instance, refined from measured TTFTs. */
  readonly prefillEstimators: Map<string, PrefillModelEstimator>;
  /** Disaggregated models: requests about to join each decode instance, decode durations. */
  readonly decodeOutlook?: DecodeOutlook;
  /** vllm-mooncake P/D: the prefill engines' ids, read from their bootstrap servers. */
  readonly bootstrapIds?: BootstrapEngineIds;
  /** Predicted hits against the engines' reported reuse, per instance. */
  readonly agreement: KvAgreementMonitor;
  /** Mirrors of the engines' own prefix caches, from their KV events (instances with kvEvents). */
  readonly engineCaches: EngineCaches;
  /** The store's keys mirrored from the master's KV events (`kv.masterEvents`). */
  readonly poolMirror?: PoolMirror;
  /** Discovered instances refused (credentials in the URL, host not allowed), each once. */
  discoveryRefused = 0;
  /** Grows by one per decision (round robin). */
  sequence = 0;
  /** The last prompts dispatched (token ids), for `POST /admin/kv/detect {"recent": n}`. */
  readonly recentPrompts = new RecentPrompts();
  /** Which instances list which LoRA adapters (src/cluster/adapter_poller.ts fills it). */
  readonly adapters = new AdapterCatalog();

  private constructor(init: {
    config: ModelConfig;
    tokenizer: AsyncPromptTokenizer;
    tokenizerFailures: TokenizeFailureLog;
    localTokenizer?: LoadedTokenizer;
    keyScheme: KeyScheme;
    store?: MooncakeClient;
    predicted?: PredictedIndex;
    cluster: ModelCluster;
    defaultPolicy: NamedPolicy;
    prefillEstimators: Map<string, PrefillModelEstimator>;
    decodeOutlook?: DecodeOutlook;
    bootstrapIds?: BootstrapEngineIds;
    agreement: KvAgreementMonitor;
    engineCaches: EngineCaches;
    poolMirror?: PoolMirror;
  }) {
    this.poolMirror = init.poolMirror;
    this.agreement = init.agreement;
    this.engineCaches = init.engineCaches;
    this.bootstrapIds = init.bootstrapIds;
    this.prefillEstimators = init.prefillEstimators;
    this.decodeOutlook = init.decodeOutlook;
    this.config = init.config;
    this.tokenizer = init.tokenizer;
    this.tokenizerFailures = init.tokenizerFailures;
    this.localTokenizer = init.localTokenizer;
    this.keyScheme = init.keyScheme;
    this.store = init.store;
    this.predicted = init.predicted;
    this.cluster = init.cluster;
    this.defaultPolicy = init.defaultPolicy;
  }

  /** Builds the runtime; throws with a clear message when the tokenizer or key scheme is wrong. */
  static async create(config: ModelConfig, deps: RuntimeDeps): Promise<ModelRuntime> {
    const tokenizerFailures = new TokenizeFailureLog({
      label: config.name,
      onFailure: () => deps.onTokenizerFailure?.(config.name),
      log: (message) => deps.log(message, { level: "warn", model: config.name }),
    });
    const prefillEstimators = new Map<string, PrefillModelEstimator>();
    const agreement = new KvAgreementMonitor({
      model: config.name,
      chunkSize: config.kv.chunkSize,
      now: deps.now,
      log: deps.log,
      configPath: deps.configPath,
    });
    const decodeOutlook = config.disaggregation
      ? new DecodeOutlook({ meanDecodeS: config.disaggregation.meanDecodeS, now: deps.now })
      : undefined;
    const cluster = createCluster(config, deps, decodeOutlook, (id) => {
      prefillEstimators.delete(id);
      agreement.forget(id);
    });
    const { tokenizer, localTokenizer } = await createTokenizer(
      config,
      deps,
      cluster,
      tokenizerFailures,
    );
    const keyScheme = createKeyScheme(keySchemeOptionsFromKv(config.kv, config.name));
    deps.log(describeSeed(keyScheme), { model: config.name });
    return new ModelRuntime({
      config,
      tokenizer,
      tokenizerFailures,
      localTokenizer,
      keyScheme,
      store: createStore(config, deps),
      predicted: config.kv.predictedIndex.enabled
        ? new PredictedIndex({
          now: deps.now,
          ttlMs: config.kv.predictedIndex.ttlMs,
          maxEntries: config.kv.predictedIndex.maxKeys,
        })
        : undefined,
      cluster,
      defaultPolicy: buildPolicy(config.policy, config),
      prefillEstimators,
      agreement,
      engineCaches: new EngineCaches(
        config.instances.filter((i) => i.kvEvents).map((i) => i.id),
        config.kv.chunkSize,
      ),
      poolMirror: config.kv.masterEvents && config.kv.store === "mooncake"
        ? new PoolMirror()
        : undefined,
      decodeOutlook,
      bootstrapIds: config.disaggregation?.protocol === "vllm-mooncake"
        ? new BootstrapEngineIds({
          fetch: deps.fetch,
          timeoutMs: config.health.timeoutMs,
          readLoads: rankLoadsReader(deps.fetch, config.health.timeoutMs),
        })
        : undefined,
    });
  }

  /** The online prefill model of an instance (created on first use from the configured prior). */
  estimator(instanceId: string, prior: TtftModelParams): PrefillModelEstimator {
    let estimator = this.prefillEstimators.get(instanceId);
    if (!estimator) {
      estimator = new PrefillModelEstimator(prior.prefillModel);
      this.prefillEstimators.set(instanceId, estimator);
    }
    return estimator;
  }
}

function createCluster(
  config: ModelConfig,
  deps: RuntimeDeps,
  decodeOutlook: DecodeOutlook | undefined,
  onRemoved: (id: string) => void,
): ModelCluster {
  const cluster = new ModelCluster({
    model: config.name,
    onRemoved,
    health: config.health,
    loadPollIntervalMs: config.load.pollIntervalMs,
    loadStaleAfterMs: config.load.staleAfterMs,
    leaseExpiryMs: config.load.leaseExpiryMs,
    // Probes and load polls are background work: never children of a request's trace.
    fetch: untracedFetch(deps.fetch),
    now: deps.now,
    timers: deps.timers,
    log: deps.log,
    ...(decodeOutlook
      ? {
        joiners: {
          count: (id: string) => decodeOutlook.leasedJoiners(id),
          sentAtOnce: config.disaggregation?.protocol !== "vllm-nixl",
        },
      }
      : {}),
  });
  for (const instance of config.instances) cluster.upsert(instance, "config");
  return cluster;
}

async function createTokenizer(
  config: ModelConfig,
  deps: RuntimeDeps,
  cluster: ModelCluster,
  failures: TokenizeFailureLog,
): Promise<{ tokenizer: AsyncPromptTokenizer; localTokenizer?: LoadedTokenizer }> {
  switch (config.tokenizer.mode) {
    case "local": {
      const localTokenizer = await loadCachedTokenizer(config, deps);
      const pool = deps.tokenizerPools?.get(tokenizerSpec(config), config.tokenizer.timeoutMs);
      const tokenizer = pool
        ? new PooledAsyncTokenizer(pool, localTokenizer, failures)
        : new LocalAsyncTokenizer(localTokenizer, failures);
      return { tokenizer, localTokenizer };
    }
    case "engine":
      return {
        tokenizer: new EngineTokenizer({
          engine: config.instances.some((i) => i.engine === "sglang") ? "sglang" : "vllm",
          model: config.name,
          // Any instance that takes traffic can tokenize; the healthiest first.
          baseUrl: () => cluster.entries().find((e) => cluster.isHealthy(e))?.config.url,
          timeoutMs: config.tokenizer.timeoutMs,
          fetch: deps.fetch,
          failures,
        }),
      };
    case "none":
      return { tokenizer: new NoneTokenizer() };
  }
}

function tokenizerSpec(config: ModelConfig): TokenizerSpec {
  return {
    dir: config.tokenizer.path!,
    fastPath: config.tokenizer.fastPath,
    cacheMaxTokens: config.tokenizer.cacheMaxTokens,
  };
}

/** A tokenizer directory is parsed once per router (a reload reuses it). */
function loadCachedTokenizer(config: ModelConfig, deps: RuntimeDeps): Promise<LoadedTokenizer> {
  const spec = tokenizerSpec(config);
  const key = `${spec.dir}\0${spec.fastPath}\0${spec.cacheMaxTokens}`;
  let pending = deps.tokenizerCache?.get(key);
  if (!pending) {
    pending = loadTokenizer(spec.dir, spec);
    deps.tokenizerCache?.set(key, pending);
    pending.catch(() => deps.tokenizerCache?.delete(key));
  }
  return pending;
}

function createStore(config: ModelConfig, deps: RuntimeDeps): MooncakeClient | undefined {
  const urls = masterUrls(config.kv);
  if (config.kv.store !== "mooncake" || urls.length === 0) return undefined;
  return new MooncakeClient({
    url: urls,
    fetch: deps.masterFetch ?? deps.fetch,
    now: deps.now,
    health: new StoreHealth({
      downWindowMs: config.kv.downWindowMs,
      onChange: ({ state, error }) =>
        deps.log(
          state === "down"
            ? "KV store down: dispatching by load only during its down-window"
            : "KV store answering again",
          {
            level: state === "down" ? "warn" : "info",
            model: config.name,
            url: config.kv.url,
            error,
            downWindowMs: config.kv.downWindowMs,
          },
        ),
    }),
    batchSize: config.kv.batchSize,
    deadlineMs: config.kv.timeoutMs,
    leaderCheckTimeoutMs: config.kv.leaderCheckTimeoutMs,
    onMasterChange: ({ from, to }) =>
      deps.log("KV store: following another Mooncake master (the one that serves)", {
        model: config.name,
        from,
        to,
      }),
  });
}

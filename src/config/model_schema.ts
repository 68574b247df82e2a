import { z } from "zod";
import { hasUserinfo } from "./instance_url.ts";
import { EXTRA_KEY_STYLES, HASH_ALGORITHMS } from "../hashing/chain_hasher.ts";
import { DECODE_POLICY_NAMES } from "../scheduling/decode_policy.ts";
import { DEFAULT_DECODE_MODEL } from "../scheduling/decode_model.ts";
import { DECODE_LOAD_SCOPES, EARLY_REJECTION_MODES } from "../scheduling/pd_admission.ts";
import { LOCAL_PREFILL_MODES } from "../scheduling/local_prefill.ts";
import { QUEUE_ADMIT_WHEN } from "../scheduling/queue_rules.ts";

/**
 * One model's section of the configuration (instances, discovery, tokenizer, kv, policy, SLOs,
 * disaggregation), field by field; schema.ts assembles the whole file and adds the checks across
 * fields (model_checks.ts). Defaults follow docs/compat.md (Llumnix's settings, Mooncake's ports).
 *
 * Each default is written once, on its field: a section left out is `.prefault({})`, i.e. parsed
 * from `{}`, so it takes its fields' defaults.
 */

const httpUrl = z.url({ protocol: /^https?$/, error: "expected an http:// or https:// URL" });
/**
 * An engine's URL: http(s), no credentials. Userinfo (`http://user:pass@host`) would be logged,
 * shown by /admin/instances and sent as `Authorization: Basic`, replacing the client's token.
 */
const instanceUrl = httpUrl.refine((url) => !hasUserinfo(url), {
  error: "credentials in the URL (user:pass@) are not accepted",
});

/**
 * Instance ids become metric labels, log fields and admin URL segments: short and plain, so every
 * one can be drained and removed again through the admin API.
 */
export const MAX_ID_CHARS = 128;
const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/;

const id = z.string().max(MAX_ID_CHARS).regex(
  ID_PATTERN,
  "expected letters, digits, '_', '.', ':' or '-' (starting with a letter or digit)",
);

/** Why `value` cannot be an instance id (for ids made at run time: discovery), or undefined. */
export function instanceIdProblem(value: string): string | undefined {
  if (value.length > MAX_ID_CHARS) return `longer than ${MAX_ID_CHARS} characters`;
  if (!ID_PATTERN.test(value)) return "holds characters other than letters, digits, _ . : -";
  return undefined;
}

/**
 * An engine's KV event publisher (vLLM's `--kv-events-config` with `publisher: "zmq"`): the
 * router mirrors the engine's own prefix cache from it (docs/routing.md#engine-kv-events).
 */
export const KvEventsSchema = z.strictObject({
  /** The publisher's PUB socket, e.g. `tcp://10.0.0.1:5557` (vLLM binds it for `tcp://*:5557`). */
  endpoint: z.string().regex(/^(tcp|ipc):\/\/\S+$/, "expected tcp://host:port or ipc://path"),
  /** Its replay ROUTER socket (`replay_endpoint`): how a gap or a late start is filled. */
  replayEndpoint: z.string().regex(/^(tcp|ipc):\/\/\S+$/, "expected tcp://host:port or ipc://path")
    .optional(),
  /** The topic the publisher sends under (its `topic`; empty by default). */
  topic: z.string().default(""),
});

export const InstanceSchema = z.strictObject({
  id,
  url: instanceUrl,
  /** Host part of the `transport_endpoint_` the store reports for this instance's KV segment. */
  kvHost: z.string().min(1).optional(),
  role: z.enum(["neutral", "prefill", "decode"]).default("neutral"),
  engine: z.enum(["vllm", "sglang", "openai"]).default("vllm"),
  /** A prefill instance's KV bootstrap server port (vllm-mooncake, sglang); 8998 when unset. */
  bootstrapPort: z.int().min(1).max(65535).optional(),
  /** Mirror the engine's own prefix cache from its KV events (vLLM; off when unset). */
  kvEvents: KvEventsSchema.optional(),
});

/** An instance group resolved from DNS (e.g. a Kubernetes headless Service). */
export const DiscoverySchema = z.strictObject({
  /** Instance ids become `{name}-{address}:{port}`. */
  name: id,
  hostname: z.string().min(1),
  /** `A`/`AAAA` records with this port, or `SRV` records that carry their own ports. */
  recordType: z.enum(["A", "AAAA", "SRV"]).default("A"),
  port: z.int().min(1).max(65535).optional(),
  scheme: z.enum(["http", "https"]).default("http"),
  intervalMs: z.int().min(100).default(10_000),
  role: z.enum(["neutral", "prefill", "decode"]).default("neutral"),
  engine: z.enum(["vllm", "sglang", "openai"]).default("vllm"),
  bootstrapPort: z.int().min(1).max(65535).optional(),
});

/**
 * Conditional disaggregation: a request prefills on its decode instance itself (a plain request
 * there) when the prompt part that instance lacks is at most `maxTokens` (`threshold`, Dynamo's
 * rule), or also when the router predicts it sooner than a remote prefill and the KV transfer
 * (`predicted`). vLLM protocols only: SGLang decode servers refuse a request without a room.
 */
export const LocalPrefillSchema = z.strictObject({
  mode: z.enum(LOCAL_PREFILL_MODES).default("off"),
  maxTokens: z.int().min(0).default(1000),
  /**
   * Prefill tokens a decode engine computes with each decode step (its chunked-prefill budget,
   * vLLM's `--max-num-batched-tokens`); unset: a local prefill is judged as one whole pause.
   */
  chunkTokens: z.int().min(1).optional(),
});

/** A decode step's time (src/scheduling/decode_model.ts); the default is an assumption. */
const DecodeModelSchema = z.strictObject({
  /** The fixed part of a step (reading the weights). */
  baseS: z.number().positive().default(DEFAULT_DECODE_MODEL.baseS),
  /** Per running request. */
  perRequestS: z.number().min(0).default(DEFAULT_DECODE_MODEL.perRequestS),
  /** Per KV token of the batch (a step reads every running request's context); unset: 0. */
  perKvTokenS: z.number().min(0).optional(),
  /**
   * KV tokens assumed per running request where the engine reports no cache figures (SGLang, a
   * stale report); required with `perKvTokenS`.
   */
  kvTokensPerRequest: z.number().min(0).optional(),
}).refine((m) => m.perKvTokenS === undefined || m.kvTokensPerRequest !== undefined, {
  message: "perKvTokenS needs kvTokensPerRequest: the KV per request assumed where an engine " +
    "reports none",
});

/**
 * Prefill/decode disaggregation (docs/compat.md §7): each request gets a prefill and a decode
 * instance, driven through the protocol the engines speak.
 */
export const DisaggregationSchema = z.strictObject({
  protocol: z.enum(["vllm-nixl", "vllm-mooncake", "sglang"]),
  /**
   * How the decode side is judged before any prefill work starts: `early`, by its batch now
   * (Mooncake §7.2); `predicted`, as forecast for the end of the prefill (§7.4); `committed`, by
   * every request bound for it, those still prefilling too (the default: in the simulator it
   * served as many or more within both SLOs than the other two on every cluster, with the
   * flow-control queue and without; docs/sim/pd/README.md).
   */
  earlyRejection: z.enum(EARLY_REJECTION_MODES).default("committed"),
  /**
   * Whose decode load that judges: the chosen instance's, or the decode pool's mean (the paper's
   * wording; how the two compare in the simulator: docs/sim/pd/README.md §2).
   */
  decodeLoad: z.enum(DECODE_LOAD_SCOPES).default("instance"),
  decodePolicy: z.enum(DECODE_POLICY_NAMES).default("least_running"),
  /**
   * The decode engines' step time, seconds: `baseS` + `perRequestS` per running request +
   * `perKvTokenS` per KV token of the batch (the decode choice, the TBT judgment, local prefill).
   * Admission's TBT judgment counts the request's own prompt and the batch's KV as
   * `decodeBatchKv` says (vLLM reports it: the KV usage gauge times the size in
   * `cache_config_info`); elsewhere, and where an engine reports none, `kvTokensPerRequest` per
   * request.
   */
  decodeModel: DecodeModelSchema.prefault({}),
  /**
   * With `decodeModel.perKvTokenS`, the KV per request of a decode batch: each engine's report
   * (`reported`) or the model's `kvTokensPerRequest` (`guess`); the request's own prompt counts
   * either way. In the simulator `guess` served more requests within both SLOs with
   * `earlyRejection: early`, `reported` with `predicted` and `committed` (docs/sim/pd/README.md).
   */
  decodeBatchKv: z.enum(["reported", "guess"]).default("reported"),
  /**
   * Requests a decode engine batches (vLLM's `--max-num-seqs`): a request past it waits for a
   * place, so admission refuses it (`tbt_slo`). Unset: only the TBT SLO bounds a batch.
   */
  decodeMaxBatch: z.int().min(1).optional(),
  /** Mean decode duration assumed until streamed P/D requests have measured it (seconds). */
  meanDecodeS: z.number().positive().default(10),
  localPrefill: LocalPrefillSchema.prefault({}),
});

export const KeyParamsSchema = z.strictObject({
  model: z.string().min(1).optional(),
  tpRank: z.int().min(0).optional(),
  ppRank: z.int().min(0).optional(),
  tpSize: z.int().min(1).optional(),
  ppSize: z.int().min(1).optional(),
  worldSize: z.int().min(1).optional(),
  workerId: z.int().min(0).optional(),
  dtype: z.string().min(1).optional(),
  tag: z.string().optional(),
  cachePrefix: z.string().optional(),
  group: z.int().min(0).optional(),
  mla: z.boolean().optional(),
  /** vLLM store: total KV heads; tpSize > numKvHeads shares keys across ranks (GQA). */
  numKvHeads: z.int().min(1).optional(),
  /** vLLM store: decode / prefill context-parallel sizes (the `@dcp` / `@pcp` key fields). */
  dcpSize: z.int().min(1).optional(),
  pcpSize: z.int().min(1).optional(),
  /** vLLM store: KV-cache groups of a hybrid model, a count or each group's kind. */
  groups: z.union([
    z.int().min(1),
    z.array(z.enum(["attention", "mla", "mamba"])).min(1),
  ]).optional(),
  /** SGLang HiCache: tp_lcm_size (split heads when it exceeds tpSize). */
  tpLcmSize: z.int().min(1).optional(),
  /** LMCache `lmcache.tag.*` values, written `@name%value` in this order. */
  lmcacheTags: z.record(z.string(), z.string()).optional(),
});

export const KvSchema = z.strictObject({
  store: z.enum(["mooncake", "none"]).default("mooncake"),
  /**
   * The Mooncake master's admin/metrics port (default 9003), not the metadata server; or every
   * master of an HA group (leader and standbys, any order): the router follows the one that serves.
   */
  url: z.union([httpUrl, z.array(httpUrl).min(1).max(16)]).optional(),
  /** Bound of one `/health` sweep of the HA masters, and least time between two. */
  leaderCheckTimeoutMs: z.int().min(1).max(60_000).default(1_000),
  hash: z.enum(HASH_ALGORITHMS).default("sha256_cbor"),
  /**
   * The engines' PYTHONHASHSEED (vLLM) / GO_HASH_SEED (Llumnix), hashed as given. Omitted: the
   * engine default ("0" for llumnix, "vllm-none-hash" for vLLM sha256 / sha256_cbor; xxhash
   * needs one). docs/compat.md §2.
   */
  seed: z.string().optional(),
  chunkSize: z.int().min(1).max(1 << 20).default(256),
  /** vLLM `hash_block_size` (hybrid models), a divisor of chunkSize. */
  hashBlockSize: z.int().min(1).optional(),
  saveUnfullChunk: z.boolean().default(false),
  /**
   * How vLLM hashes a request's LoRA and `cache_salt` (docs/compat.md §2): "tagged" as
   * `("lora", name, path)` / `("cache_salt", salt)`, vLLM 0.31.0 and later (a LoRA then needs its
   * `path` in `loras`); "plain" as the bare name / salt, vLLM 0.30 and older.
   */
  extraKeys: z.enum(EXTRA_KEY_STYLES).default("tagged"),
  /** A preset (llumnix, vllm-mooncake-store, lmcache, sglang-hicache) or a custom template. */
  keyFormat: z.string().min(1).default("llumnix"),
  keyParams: KeyParamsSchema.prefault({}),
  requireAllRanks: z.boolean().default(false),
  /**
   * The engines load by themselves, on a miss, what the store holds of a prompt's prefix in
   * another engine's segment (vLLM's MooncakeStoreConnector does). On: `affinity_ttft` weighs
   * moving a prefix at its pool weight (`poolDuplicationWeight`), not its full one, and the
   * predicted TTFT of policies without their own counts that load, and so does the predicted hit
   * (`x-tidegate-hit-tokens`, the hit-mismatch metric) and a local prefill on a decode instance
   * (docs/disaggregation.md). The TTFT policies' scores count the store's part either way.
   * Unset: on for the key formats of connectors that do (`vllm-mooncake-store`, `lmcache`,
   * `sglang-hicache`), off for `llumnix` and custom templates.
   */
  poolLoads: z.boolean().optional(),
  minPromptTokens: z.int().min(0).default(1024),
  timeoutMs: z.int().min(1).max(60_000).default(50),
  batchSize: z.int().min(1).max(4096).default(128),
  /** After a failed lookup the store is skipped for this long (Llumnix: 30 s). */
  downWindowMs: z.int().min(0).default(30_000),
  predictedIndex: z.strictObject({
    enabled: z.boolean().default(true),
    ttlMs: z.int().min(1).default(5_000),
    maxKeys: z.int().min(1).default(200_000),
  }).prefault({}),
  /**
   * Streams ask the engine for `usage` (`stream_options.include_usage`) when the client did not,
   * and that usage chunk is kept from the client: the engine's reuse feeds the live agreement.
   */
  requestStreamUsage: z.boolean().default(true),
  /**
   * When an instance is `blind` (the engine reuses prefixes the router predicted as misses):
   * warn only, or dispatch the model by load alone until agreement returns.
   */
  onDisagreement: z.enum(["warn", "load_only"]).default("warn"),
  /**
   * The master's KV events (`--enable_kv_events`, `--kv_events_bind_endpoint`): while their mirror
   * of the store is exact, requests are answered from it without a lookup
   * (docs/routing.md#the-masters-kv-events). Off when unset.
   */
  masterEvents: z.strictObject({
    /** The master's PUB socket, e.g. `tcp://10.0.0.9:5557`. */
    endpoint: z.string().regex(/^(tcp|ipc):\/\/\S+$/, "expected tcp://host:port or ipc://path"),
    topic: z.string().default(""),
    /** Share of requests also looked up, to count the mirror's disagreements with the master. */
    crossCheckRate: z.number().min(0).max(1).default(0.01),
    /** How often an untrusted mirror reads the master's keys again. */
    resyncIntervalMs: z.int().min(100).default(30_000),
  }).optional(),
});

export const TokenizerSchema = z.strictObject({
  /** local: tokenizer.json + chat template; engine: ask the backend; none: token-id prompts only. */
  mode: z.enum(["local", "engine", "none"]).default("local"),
  /** Directory with tokenizer.json + tokenizer_config.json, or `builtin:qwen3`. */
  path: z.string().min(1).optional(),
  fastPath: z.boolean().default(true),
  /** Token-id cache for multi-turn chat, bounded by cached tokens (and one segment per 128 of them). */
  cacheMaxTokens: z.int().min(0).default(4_000_000),
  /** Timeout of an engine-mode tokenize call. */
  timeoutMs: z.int().min(1).default(2_000),
});

export const HealthSchema = z.strictObject({
  intervalMs: z.int().min(50).default(3_000),
  timeoutMs: z.int().min(10).default(1_000),
  failuresToOpen: z.int().min(1).default(3),
  successesToClose: z.int().min(1).default(2),
  /** Before a half-open trial request is let through after the breaker opened. */
  openCooldownMs: z.int().min(0).default(5_000),
});

/** How the engines' own load pages are read and how the dispatch-time account ages. */
export const LoadSchema = z.strictObject({
  /** Period of the vLLM `/metrics` / SGLang `/get_load` poll. */
  pollIntervalMs: z.int().min(50).default(1_000),
  /** A report older than this is ignored (and flagged stale on /metrics and /admin). */
  staleAfterMs: z.int().min(1).default(5_000),
  /** Dispatch-time leases with no first token after this long are expired and counted. */
  leaseExpiryMs: z.int().min(1).default(10_000),
});

export const PolicySchema = z.union([
  z.string().min(1),
  z.strictObject({
    name: z.string().min(1),
    params: z.record(z.string(), z.unknown()).default({}),
  }),
]);

/** A token of an HTTP header name (RFC 9110). */
const headerName = z.string().regex(
  /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/,
  "expected an HTTP header name",
);

/** One arm of an A/B experiment: a named policy and its share of the traffic. */
export const ArmSchema = z.strictObject({
  name: z.string().max(64).regex(
    /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/,
    "expected letters, digits, '_', '.', ':' or '-' (starting with a letter or digit)",
  ).refine((name) => name !== "none" && name !== "default", {
    error: '"none" and "default" are reserved (they label requests outside any experiment)',
  }),
  policy: PolicySchema,
  weight: z.number().positive().default(1),
});

/**
 * An A/B experiment: requests split between policy arms, sticky by `key` so a conversation
 * never alternates between arms (and never warms the other arm's cache). See
 * src/experiment/experiment_key.ts for the key forms.
 */
export const ExperimentSchema = z.strictObject({
  /** `header:NAME`, `user` (OpenAI field), `api_key` (bearer token), `prefix`, `random`. */
  key: z.string().regex(
    /^(header:[!#$%&'*+.^_`|~0-9A-Za-z-]+|user|api_key|prefix|random)$/,
    'expected "header:NAME", "user", "api_key", "prefix" or "random"',
  ).default("prefix"),
  /** Mixed into the hash: change it to reshuffle which keys go to which arm. */
  salt: z.string().max(200).default(""),
  /** Requests without the key: a weighted random arm each, or the control (first) arm. */
  fallback: z.enum(["random", "control"]).default("random"),
  /** `prefix` keys on the prompt's opening: this many tokens (~4 characters each for text). */
  prefixTokens: z.int().min(1).max(1 << 20).default(1024),
  /** Operator-only: a header naming the arm, honoured with the admin token (off when unset). */
  overrideHeader: headerName.optional(),
  arms: z.array(ArmSchema).min(
    2,
    "an experiment needs at least two arms (for a single policy set the model's `policy`)",
  ).max(16),
}).superRefine((experiment, ctx) => {
  const seen = new Set<string>();
  experiment.arms.forEach((arm, a) => {
    if (seen.has(arm.name)) {
      ctx.addIssue({
        code: "custom",
        path: ["arms", a, "name"],
        message: `duplicate arm name "${arm.name}"`,
      });
    }
    seen.add(arm.name);
  });
});

/**
 * The flow-control queue (docs/flow_control.md): requests admission refuses wait instead, by
 * priority band, fair between tenants, each until its TTL; bounded in requests and prompt tokens.
 */
export const QueueSchema = z.strictObject({
  enabled: z.boolean().default(false),
  maxRequests: z.int().min(1).default(256),
  maxPromptTokens: z.int().min(1).default(2_000_000),
  /** How long a request may wait; a client may ask for less (`x-tidegate-queue-ttl`, seconds). */
  ttlS: z.number().positive().default(30),
  /** The head of the queue is re-planned at least this often, besides whenever a request ends. */
  recheckMs: z.int().min(1).default(50),
  /**
   * When a waiting request goes (src/scheduling/queue_rules.ts): `fits`, as soon as it fits;
   * `idle`, once it fits and its instance has no prefill waiting (rescues fewer, loses less
   * goodput); `cause` (the default), as `idle` if its TTFT refused it and as `fits` if the decode
   * side did or late binding held it. In the simulator its goodput was at or above the 429-only
   * admission's on every P/D cluster (`fits` fell below on one) and within 1% of it without P/D
   * (docs/flow_control.md).
   */
  admitWhen: z.enum(QUEUE_ADMIT_WHEN).default("cause"),
  /**
   * Late binding (src/scheduling/late_binding.ts): a request admission admits also waits while
   * every healthy instance has more prefill tokens waiting than this or others are held so, and
   * goes in the queue's order once one has room, placed then. Unset: only refused requests wait.
   */
  holdAboveTokens: z.int().min(0).optional(),
}).refine((q) => q.holdAboveTokens === undefined || q.enabled, {
  message: "holdAboveTokens holds requests in the flow-control queue: set enabled: true",
  path: ["holdAboveTokens"],
});

export const SloSchema = z.strictObject({
  ttftS: z.number().positive().optional(),
  tbtS: z.number().positive().optional(),
  admission: z.boolean().default(false),
  queue: QueueSchema.prefault({}),
});

export const ModelSchema = z.strictObject({
  name: z.string().min(1),
  /** Other names clients may use; `loras` map names to a LoRA adapter (part of the hash). */
  aliases: z.array(z.string().min(1)).default([]),
  loras: z.array(z.strictObject({
    name: z.string().min(1),
    /** The engine's `lora_name`. */
    adapter: z.string().min(1),
    /**
     * The adapter path the engine was given (`--lora-modules name=path`, or `lora_path` of
     * `/v1/load_lora_adapter`), as written there: `kv.extraKeys` "tagged" hashes it.
     */
    path: z.string().min(1).optional(),
  })).default([]),
  /**
   * When no instance lists a requested adapter in its `/v1/models`, load it on the instance the
   * policy picks (`POST /v1/load_lora_adapter` with the adapter's `path`; the engine needs
   * VLLM_ALLOW_RUNTIME_LORA_UPDATING). Off: such requests go wherever the policy sends them.
   */
  loraLoading: z.boolean().default(false),
  tokenizer: TokenizerSchema.prefault({}),
  kv: KvSchema,
  policy: PolicySchema.default("affinity_ttft"),
  /** An A/B experiment between policies (replaces `policy` while it runs). */
  experiment: ExperimentSchema.optional(),
  slo: SloSchema.prefault({}),
  /** Overrides of the prefill-time model T(n_new, n_cached) (seconds, n in thousands). */
  prefillModel: z.strictObject({
    linear: z.number().nonnegative(),
    quadratic: z.number().nonnegative(),
    constant: z.number().nonnegative().optional(),
  }).optional(),
  health: HealthSchema.prefault({}),
  load: LoadSchema.prefault({}),
  /** Bounds on one request's prompt, checked before any work on it (tests/gateway/prompt_limits). */
  limits: z.strictObject({
    /**
     * Characters the prompt hands the tokenizer (every chat-template input: messages, tools,
     * documents, kwargs; a token id counts as 4, a token's usual text); beyond it 413 before any
     * rendering or tokenizing.
     */
    maxPromptChars: z.int().min(1).default(4_000_000),
    /** Tokens of the prompt as the engine counts them; beyond it 400 (the engine's context). */
    maxPromptTokens: z.int().min(1).optional(),
  }).prefault({}),
  instances: z.array(InstanceSchema).default([]),
  discovery: z.array(DiscoverySchema).default([]),
  disaggregation: DisaggregationSchema.optional(),
});

export type InstanceConfig = z.infer<typeof InstanceSchema>;
export type DiscoveryConfig = z.infer<typeof DiscoverySchema>;
export type KvConfig = z.infer<typeof KvSchema>;
export type HealthConfig = z.infer<typeof HealthSchema>;
export type LoadConfig = z.infer<typeof LoadSchema>;
export type ExperimentConfig = z.infer<typeof ExperimentSchema>;
export type ArmConfig = z.infer<typeof ArmSchema>;
export type DisaggregationConfig = z.infer<typeof DisaggregationSchema>;
export type QueueConfig = z.infer<typeof QueueSchema>;

import { assertEquals } from "../assert.ts";
import { ConfigError, resolveConfig } from "../../src/config/load.ts";
import { ModelSchema } from "../../src/config/schema.ts";

const INSTANCE = { id: "gpu-a", url: "http://127.0.0.1:8001" };
const MINIMAL = {
  models: [{
    name: "m",
    tokenizer: { mode: "none" },
    kv: { store: "none" },
    instances: [INSTANCE],
  }],
};

const KV_DEFAULTS = {
  hash: "sha256_cbor",
  chunkSize: 256,
  saveUnfullChunk: false,
  extraKeys: "tagged",
  keyFormat: "llumnix",
  keyParams: {},
  requireAllRanks: false,
  minPromptTokens: 1024,
  timeoutMs: 50,
  batchSize: 128,
  downWindowMs: 30_000,
  leaderCheckTimeoutMs: 1_000,
  predictedIndex: { enabled: true, ttlMs: 5_000, maxKeys: 200_000 },
  requestStreamUsage: true,
  onDisagreement: "warn",
} as const;
const TOKENIZER_DEFAULTS = { fastPath: true, cacheMaxTokens: 4_000_000, timeoutMs: 2_000 };
const HEALTH_DEFAULTS = {
  intervalMs: 3_000,
  timeoutMs: 1_000,
  failuresToOpen: 3,
  successesToClose: 2,
  openCooldownMs: 5_000,
};
const LOAD_DEFAULTS = { pollIntervalMs: 1_000, staleAfterMs: 5_000, leaseExpiryMs: 10_000 };

const QUEUE_DEFAULTS = {
  enabled: false,
  maxRequests: 256,
  maxPromptTokens: 2_000_000,
  ttlS: 30,
  recheckMs: 50,
  admitWhen: "cause" as const,
};

Deno.test("resolveConfig() fills every defaulted section of a minimal config with its defaults", () => {
  const config = resolveConfig(structuredClone(MINIMAL));
  assertEquals(config, {
    listen: { host: "127.0.0.1", port: 8080, server: "node", trustedProxies: [] },
    limits: {
      maxBodyBytes: 32 * 1024 * 1024,
      upstreamHeadersTimeoutMs: 60_000,
      maxRetries: 2,
      upstreamIdleTimeoutMs: 120_000,
      maxRequestDurationMs: 1_800_000,
      clientBodyTimeoutMs: 30_000,
      maxConcurrentRequests: 8_192,
      clientHeaderTimeoutMs: 30_000,
      clientKeepAliveTimeoutMs: 75_000,
      maxConnections: 16_384,
    },
    shutdown: { readyDelayMs: 5_000, drainTimeoutMs: 30_000 },
    admin: {},
    cluster: {},
    models: [{
      name: "m",
      aliases: [],
      loras: [],
      loraLoading: false,
      tokenizer: { mode: "none", ...TOKENIZER_DEFAULTS },
      kv: { store: "none", ...KV_DEFAULTS },
      policy: "affinity_ttft",
      slo: {
        admission: false,
        queue: {
          enabled: false,
          maxRequests: 256,
          maxPromptTokens: 2_000_000,
          ttlS: 30,
          recheckMs: 50,
          admitWhen: "cause",
        },
      },
      health: HEALTH_DEFAULTS,
      load: LOAD_DEFAULTS,
      limits: { maxPromptChars: 4_000_000 },
      instances: [{ ...INSTANCE, role: "neutral", engine: "vllm" }],
      discovery: [],
    }],
  });
});

Deno.test("admin.allowedInstanceHosts is unset by default: derived from the configured instances", () => {
  const config = resolveConfig(structuredClone(MINIMAL));
  assertEquals(config.admin.allowedInstanceHosts, undefined);
  assertEquals("allowedInstanceHosts" in config.admin, false);
});

Deno.test("ModelSchema gives a model without tokenizer, health, load or slo their defaults", () => {
  const model = ModelSchema.parse({ name: "m", kv: {} });
  assertEquals(model.tokenizer, { mode: "local", ...TOKENIZER_DEFAULTS });
  assertEquals(model.kv, { store: "mooncake", ...KV_DEFAULTS });
  assertEquals(model.health, HEALTH_DEFAULTS);
  assertEquals(model.load, LOAD_DEFAULTS);
  assertEquals(model.slo, { admission: false, queue: QUEUE_DEFAULTS });
});

Deno.test("resolveConfig() completes a partly given section with the defaults of the rest", () => {
  const raw = structuredClone(MINIMAL) as { [key: string]: unknown; models: object[] };
  raw.listen = { port: 9000 };
  raw.limits = { maxRetries: 0 };
  raw.models[0] = {
    ...raw.models[0],
    kv: { store: "none", predictedIndex: { ttlMs: 100 } },
    health: { intervalMs: 100 },
    load: { leaseExpiryMs: 1 },
    slo: { ttftS: 2 },
  };
  const config = resolveConfig(raw);
  assertEquals(config.listen, {
    host: "127.0.0.1",
    port: 9000,
    server: "node",
    trustedProxies: [],
  });
  assertEquals(config.limits.maxRetries, 0);
  assertEquals(config.limits.maxBodyBytes, 32 * 1024 * 1024);
  const model = config.models[0];
  assertEquals(model.kv.predictedIndex, { enabled: true, ttlMs: 100, maxKeys: 200_000 });
  assertEquals(model.health, { ...HEALTH_DEFAULTS, intervalMs: 100 });
  assertEquals(model.load, { ...LOAD_DEFAULTS, leaseExpiryMs: 1 });
  assertEquals(model.slo, { ttftS: 2, admission: false, queue: QUEUE_DEFAULTS });
});

Deno.test("resolveConfig() validates a section that is given: null is not a left-out section", () => {
  let problems: string[] = [];
  try {
    resolveConfig({ ...structuredClone(MINIMAL), listen: null, limits: { port: 1 } });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems = error.problems;
  }
  assertEquals(problems.map((p) => p.split(":")[0]), ["listen", "limits.port"]);
});

Deno.test("resolveConfig() gives a shared state with only a Redis URL its defaults, and refuses a silence shorter than a beat", () => {
  const shared = (sharedState: Record<string, unknown>) =>
    resolveConfig({ ...structuredClone(MINIMAL), cluster: { sharedState } });
  assertEquals(shared({ redis: "redis://10.0.0.5:6379" }).cluster.sharedState, {
    redis: "redis://10.0.0.5:6379",
    prefix: "tidegate",
    timeoutMs: 250,
    heartbeatMs: 5_000,
    silentAfterMs: 15_000,
  });
  let problems: string[] = [];
  try {
    shared({ redis: "redis://r:6379", heartbeatMs: 5_000, silentAfterMs: 5_000 });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems = error.problems;
  }
  assertEquals(problems.map((p) => p.split(":")[0]), ["cluster.sharedState.silentAfterMs"]);
});

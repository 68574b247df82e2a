import type { InstanceStatus } from "../../src/cluster/model_cluster.ts";
import { assembleDashboardData, type DashboardInput } from "../../src/telemetry/dashboard_data.ts";
import { assertEquals } from "../assert.ts";

function status(id: string, overrides: Partial<InstanceStatus> = {}): InstanceStatus {
  return {
    id,
    url: `http://${id}:8000`,
    kvHost: `10.0.0.${id.length}`,
    role: "neutral",
    engine: "vllm",
    origin: "config",
    healthy: true,
    breaker: "closed",
    draining: false,
    active: 1,
    load: {
      waitingPrefillTokens: 300.5,
      runningRequests: 2,
      basis: "engine_counts",
      terms: {
        ourPrefillTokens: 100,
        othersPrefillTokens: 200.5,
        ourDecodeRequests: 1,
        othersRunningRequests: 1,
        othersWaitingRequests: 1,
      },
    },
    probeFailures: 0,
    recentTtftS: { count: 2, mean: 0.15, p50: 0.1, p90: 0.2 },
    ...overrides,
  };
}

function input(overrides: Partial<DashboardInput> = {}): DashboardInput {
  return {
    wallNowMs: 1_700_000_000_000,
    nowMs: 50_000,
    models: [{
      name: "m",
      policy: "cache_aware",
      tokenizer: "local",
      instances: [
        status("a", {
          engineReport: {
            instanceId: "a",
            usable: true,
            consecutiveFailures: 0,
            report: { waitingRequests: 3, runningRequests: 4, observedAtMs: 48_500 },
          },
        }),
        status("b", {
          healthy: false,
          breaker: "open",
          engineReport: {
            instanceId: "b",
            usable: false,
            consecutiveFailures: 2,
            lastError: "connection refused",
          },
        }),
      ],
      store: {
        url: "http://master:9003",
        health: {
          state: "down",
          downUntil: 62_000,
          consecutiveFailures: 1,
          consecutiveDeadlines: 0,
          lastError: "refused",
          successes: 5,
          failures: 1,
          deadlines: 0,
          skipped: 3,
          probes: 0,
          markedDown: 1,
          recovered: 0,
        },
      },
      predictedIndexKeys: 42,
      kvAgreement: { a: { state: "blind", samples: 6, agree: 1, over: 0, blind: 5 } },
    }],
    traffic: [
      {
        model: "m",
        instance: "a",
        requests: 4,
        promptTokens: 1000,
        predictedLocalHitTokens: 750,
        engineCachedTokens: 500,
        engineReports: 2,
        // Two of the four requests reported usage: only their prompt tokens count.
        engineReportedPromptTokens: 625,
      },
      {
        model: "other",
        instance: "b",
        requests: 9,
        promptTokens: 9,
        predictedLocalHitTokens: 9,
        engineCachedTokens: 0,
        engineReports: 0,
        engineReportedPromptTokens: 0,
      },
    ],
    ttft: { bucketMs: 10_000, windowMs: 1_800_000, from: 0, to: 1, series: [] },
    decisions: [],
    ...overrides,
  };
}

Deno.test("assembleDashboardData() joins each instance with its own model's traffic and computes hit ratios", () => {
  const data = assembleDashboardData(input());
  const [a, b] = data.models[0].instances;
  assertEquals(
    [a.requests, a.promptTokens, a.predictedHitRatio, a.engineHitRatio],
    [4, 1000, 0.75, 0.8],
    "the engine hit ratio divides by the prompt tokens of the requests that reported usage",
  );
  assertEquals(
    [b.requests, b.promptTokens, b.predictedHitRatio, b.engineHitRatio],
    [0, 0, null, null],
    "another model's instance of the same id does not count; no prompt tokens means no ratio",
  );
  assertEquals(data.models[0].totals, {
    requests: 4,
    promptTokens: 1000,
    predictedLocalHitTokens: 750,
    predictedHitRatio: 0.75,
    healthyInstances: 1,
  });
  assertEquals(data.generatedAt, 1_700_000_000_000);
});

Deno.test("assembleDashboardData() reports load, health and the engine's report with its age", () => {
  const [a, b] = assembleDashboardData(input()).models[0].instances;
  assertEquals(
    [a.waitingPrefillTokens, a.runningRequests, a.loadBasis, a.loadTerms.othersPrefillTokens],
    [300.5, 2, "engine_counts", 200.5],
  );
  assertEquals(a.engineReport, {
    waitingRequests: 3,
    runningRequests: 4,
    pendingPrefillTokens: null,
    kvUsage: null,
    ageS: 1.5,
    usable: true,
  });
  assertEquals([b.healthy, b.breaker, b.engineReport, b.engineReportError], [
    false,
    "open",
    null,
    "connection refused",
  ]);
  assertEquals(a.recentTtft, { count: 2, p50: 0.1, p90: 0.2, mean: 0.15 });
});

Deno.test("assembleDashboardData() shows the store's state, counters and remaining down-window", () => {
  const model = assembleDashboardData(input()).models[0];
  assertEquals(model.store, {
    url: "http://master:9003",
    state: "down",
    downForS: 12,
    consecutiveFailures: 1,
    lastError: "refused",
    counters: {
      successes: 5,
      failures: 1,
      deadlines: 0,
      skipped: 3,
      probes: 0,
      markedDown: 1,
      recovered: 0,
    },
  });
  assertEquals(model.predictedIndexKeys, 42);
  const base = input();
  const noStore = assembleDashboardData({
    ...base,
    models: [{ ...base.models[0], store: undefined }],
  });
  assertEquals(noStore.models[0].store, null);
});

Deno.test("assembleDashboardData() shows each instance's KV agreement, unknown when it has none", () => {
  const [a, b] = assembleDashboardData(input()).models[0].instances;
  assertEquals(a.kvAgreement, { state: "blind", samples: 6, agree: 1, over: 0, blind: 5 });
  assertEquals(b.kvAgreement, { state: "unknown", samples: 0, agree: 0, over: 0, blind: 0 });
});

Deno.test("assembleDashboardData() carries a running experiment's arms with their share of keys", () => {
  assertEquals(assembleDashboardData(input()).models[0].experiment, null, "no experiment");
  const base = input();
  const withArms = assembleDashboardData({
    ...base,
    models: [{
      ...base.models[0],
      experiment: {
        version: 3,
        key: "header:x-session-id",
        arms: [
          { name: "A", policy: "cache_aware", weight: 3 },
          { name: "B", policy: "mooncake_ttft", weight: 1 },
        ],
      },
    }],
  });
  assertEquals(withArms.models[0].experiment, {
    version: 3,
    key: "header:x-session-id",
    arms: [
      { name: "A", policy: "cache_aware", weight: 3, share: 0.75 },
      { name: "B", policy: "mooncake_ttft", weight: 1, share: 0.25 },
    ],
  });
});

Deno.test("assembleDashboardData() shows the flow-control queue by band, most urgent first; none when nobody waits", () => {
  const base = input();
  const queued = assembleDashboardData({
    ...base,
    models: [{ ...base.models[0], queue: new Map([[5, 3], [-1, 2]]) }],
  });
  assertEquals(queued.models[0].queue, {
    waiting: 5,
    bands: [{ priority: -1, waiting: 2 }, { priority: 5, waiting: 3 }],
  });
  assertEquals(assembleDashboardData(base).models[0].queue, { waiting: 0, bands: [] });
});

import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";
import { DashboardTraffic } from "../../src/telemetry/dashboard_traffic.ts";
import { GatewayMetrics } from "../../src/telemetry/metrics.ts";
import { metricsObserver } from "../../src/telemetry/metrics_observer.ts";
import { assertEquals } from "../assert.ts";
import { finishedRecord, type RecordSpec } from "./records.ts";

const SPECS: RecordSpec[] = [
  { instance: "a", promptTokens: 1000, local: { a: 768, b: 0 }, cachedTokens: 512 },
  { instance: "a", promptTokens: 500, local: { a: 0, b: 256 }, arm: "treatment" },
  { instance: "b", promptTokens: 300, local: { b: 256 }, cachedTokens: 256 },
  {
    instance: "b",
    promptTokens: 200,
    local: { b: 0 },
    status: 500,
    outcome: "upstream_error_status",
  },
  { instance: "c", unplanned: true },
  { promptTokens: 999, local: { a: 999 }, status: 429, outcome: "rejected" },
  { instance: "a", model: "other", promptTokens: 50, local: { a: 50 } },
];

Deno.test("DashboardTraffic counts per instance exactly what metricsObserver exports, summed over arms", async () => {
  const traffic = new DashboardTraffic();
  const metrics = new GatewayMetrics();
  const observer = metricsObserver(metrics);
  for (const spec of SPECS) {
    const record = finishedRecord(spec);
    traffic.onFinished(record);
    observer.onFinished(record);
  }
  const samples = parsePrometheusText(await metrics.text()).samples;
  const fromMetrics = (name: string, model: string, instance: string, scope?: string) =>
    samples.filter((s) =>
      s.name === name && s.labels.model === model && s.labels.instance === instance &&
      (scope === undefined || s.labels.scope === scope)
    ).reduce((sum, s) => sum + s.value, 0);
  for (const [model, instance] of [["m", "a"], ["m", "b"], ["m", "c"], ["other", "a"]]) {
    const t = traffic.get(model, instance);
    assertEquals(
      [
        t.requests,
        t.promptTokens,
        t.predictedLocalHitTokens,
        t.engineCachedTokens,
        t.engineReportedPromptTokens,
      ],
      [
        fromMetrics("tidegate_requests_total", model, instance),
        fromMetrics("tidegate_prompt_tokens_total", model, instance),
        fromMetrics("tidegate_predicted_hit_tokens_total", model, instance, "local"),
        fromMetrics("tidegate_engine_cached_tokens_total", model, instance),
        fromMetrics("tidegate_engine_reported_prompt_tokens_total", model, instance),
      ],
      `${model}/${instance}`,
    );
  }
  assertEquals(traffic.get("m", "a"), {
    model: "m",
    instance: "a",
    requests: 2,
    promptTokens: 1500,
    predictedLocalHitTokens: 768,
    engineCachedTokens: 512,
    engineReports: 1,
    engineReportedPromptTokens: 1000,
  });
  assertEquals(
    traffic.get("m", "c").promptTokens,
    0,
    "an unplanned request counts, its tokens do not",
  );
  assertEquals(traffic.get("m", "zzz").requests, 0);
});

Deno.test("DashboardTraffic stops adding instances beyond its bound", () => {
  const traffic = new DashboardTraffic(2);
  for (const instance of ["a", "b", "c"]) traffic.onFinished(finishedRecord({ instance }));
  assertEquals(traffic.all().map((t) => t.instance), ["a", "b"]);
});

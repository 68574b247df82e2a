import { assert, assertEquals } from "../assert.ts";
import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { startKillableProxy } from "../fakes/killable_proxy.ts";
import { completion, loadOnlyModel, range, startRouter } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";

const MODEL = "metrics-model";
const PROMPT_TOKENS = 2000;
/** How long a wait may take on a busy machine before the test gives up (not a timing bound). */
const PATIENCE_MS = 15_000;

Deno.test("/metrics shows each instance's health, breaker, in-flight prefill, engine-reported load, report age and probe failures", async () => {
  // ~10 s per prefill: the requests below stay queued while /metrics is read, however slow the
  // machine (closing the engines ends them at once).
  const slow = { model: MODEL, timeScale: 40, decodeSecondsPerToken: 0.001 };
  const vllm = startFakeEngine({ id: "vllm", flavour: "vllm", ...slow });
  const sglang = startFakeEngine({ id: "sglang", flavour: "sglang", ...slow });
  const dead = startKillableProxy(vllm.port);
  dead.kill(); // its port now refuses connections
  const { router, url } = await startRouter([loadOnlyModel(MODEL, {
    policy: "least_load",
    // The dead port refuses at once; live engines get a deadline a busy machine cannot miss.
    health: { intervalMs: 100, timeoutMs: 2_000, failuresToOpen: 2, openCooldownMs: 60_000 },
    load: { pollIntervalMs: 100, staleAfterMs: 5_000 },
    instances: [
      { id: "vllm", url: vllm.url, engine: "vllm" },
      { id: "sglang", url: sglang.url, engine: "sglang" },
      { id: "dead", url: dead.url, engine: "vllm" },
    ],
  })]);
  const cluster = router.registry.runtime(MODEL)!.cluster;
  const pending: Promise<unknown>[] = [];
  try {
    await eventually(
      () => cluster.get("dead")!.breaker.state === "open",
      PATIENCE_MS,
      "dead to open",
    );
    for (let i = 0; i < 4; i++) {
      pending.push(
        completion(url, { model: MODEL, prompt: range(i * 10_000, PROMPT_TOKENS), max_tokens: 2 })
          .then((r) => r.body?.cancel()).catch(() => {}),
      );
    }
    await eventually(
      () => vllm.load().waiting + sglang.load().waiting === 2,
      PATIENCE_MS,
      "two requests queued behind two prefills",
    );
    const queuedAt = performance.now();
    // A poll of each engine that started after the queues formed has been read.
    const polledSince = (id: string) =>
      (cluster.status().find((s) => s.id === id)?.engineReport?.report?.observedAtMs ?? -1) >=
        queuedAt;
    await eventually(
      () => polledSince("vllm") && polledSince("sglang"),
      PATIENCE_MS,
      "a load poll of each engine after the queues formed",
    );

    const response = await fetch(`${url}/metrics`);
    const text = await response.text();
    const readAt = performance.now();
    const { samples, families, errors } = parsePrometheusText(text);
    assertEquals(errors, []);
    const value = (name: string, labels: Record<string, string>) =>
      samples.find((s) =>
        s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)
      )?.value;
    const of = (instance: string) => ({ model: MODEL, instance });

    assertEquals(value("tidegate_instance_healthy", of("vllm")), 1);
    assertEquals(value("tidegate_instance_healthy", of("sglang")), 1);
    assertEquals(value("tidegate_instance_healthy", of("dead")), 0);
    assertEquals(value("tidegate_instance_breaker_state", { ...of("dead"), state: "open" }), 1);
    assertEquals(value("tidegate_instance_breaker_state", { ...of("dead"), state: "closed" }), 0);
    assertEquals(value("tidegate_instance_breaker_state", { ...of("vllm"), state: "closed" }), 1);

    const inflight = ["vllm", "sglang"].map((id) =>
      value("tidegate_instance_inflight_prefill_tokens", of(id))!
    );
    assertEquals(inflight, [2 * PROMPT_TOKENS, 2 * PROMPT_TOKENS], "least_load spreads 2 + 2");
    assertEquals(value("tidegate_instance_inflight_prefill_tokens", of("dead")), 0);

    // vLLM counts: one prefilling (running), one waiting. SGLang adds its pending tokens.
    assertEquals(value("tidegate_instance_reported_waiting_requests", of("vllm")), 1);
    assertEquals(value("tidegate_instance_reported_running_requests", of("vllm")), 1);
    assertEquals(value("tidegate_instance_reported_waiting_requests", of("sglang")), 1);
    assertEquals(value("tidegate_instance_reported_pending_tokens", of("vllm")), undefined);
    const pendingTokens = value("tidegate_instance_reported_pending_tokens", of("sglang"))!;
    assert(
      pendingTokens > PROMPT_TOKENS && pendingTokens <= 2 * PROMPT_TOKENS,
      `pending ${pendingTokens}: the queued prompt plus the rest of the running prefill`,
    );
    // The age (seconds) is that of the latest poll: one that started after the queues formed.
    const sinceQueuedS = (readAt - queuedAt) / 1000;
    for (const id of ["vllm", "sglang"]) {
      const age = value("tidegate_instance_report_age_seconds", of(id))!;
      assert(
        age >= 0 && age <= sinceQueuedS,
        `${id}: report age ${age} s, yet a poll answered within the last ${sinceQueuedS} s`,
      );
      assertEquals(value("tidegate_instance_report_stale", of(id)), 0);
    }
    assertEquals(value("tidegate_instance_report_stale", of("dead")), 1, "no report: stale");
    assertEquals(value("tidegate_instance_report_age_seconds", of("dead")), undefined);

    assert(value("tidegate_instance_probe_failures_total", of("dead"))! >= 2);
    assertEquals(value("tidegate_instance_probe_failures_total", of("vllm")), 0);
    assertEquals(families.get("tidegate_instance_probe_failures_total")?.type, "counter");
    assertEquals(families.get("tidegate_instance_healthy")?.type, "gauge");
  } finally {
    // Engines first: their queued requests end at once instead of running their prefills.
    await Promise.all([vllm.close(), sglang.close(), dead.close()]);
    await Promise.all(pending);
    await router.close();
  }
});

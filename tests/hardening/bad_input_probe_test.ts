/**
 * The hardening probe: 5,000 seeded bad inputs against a router in front of fake engines, over
 * loopback. Every answer is an OpenAI-shaped error or a valid answer, never a 5xx; /healthz keeps
 * answering during the run; every lease is back at the end.
 */
import { assert, assertEquals } from "../assert.ts";
import { startTestCluster } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import { generateBadInputs } from "./bad_input_generator.ts";
import { MODEL } from "./probe_input.ts";
import { sendProbe } from "./send_probe.ts";
import { watchHealth } from "./watch_health.ts";

Deno.test("5,000 seeded bad inputs get OpenAI-shaped errors or valid answers, never a 5xx; the router stays responsive and holds no lease", async () => {
  // Engines answer with two tokens whatever max_tokens says (2^53 would never end).
  const t = await startTestCluster({
    engine: { model: MODEL, decodeSecondsPerToken: 0.0005, completionTokens: () => 2 },
    model: { name: MODEL, tokenizer: { mode: "none" } },
  });
  try {
    const inputs = generateBadInputs(13, 5_000);
    assertEquals(inputs.length, 5_000);
    const health = watchHealth(t.url);
    const outcome = await sendProbe(t.url, inputs, 8);
    const probes = await health.stop();
    assertEquals(outcome.problems, [], JSON.stringify([...outcome.byStatus]));
    assertEquals(outcome.sent, 5_000);
    assert((outcome.byStatus.get(400) ?? 0) > 1_000, JSON.stringify([...outcome.byStatus]));
    assert((outcome.byStatus.get(200) ?? 0) > 100, "valid inputs reached the engines");
    assertEquals(probes.failed, 0, "/healthz always answered 200");
    assert(probes.answered >= 2, `/healthz answered ${probes.answered} times during the run`);
    assert(probes.slowestMs < 5_000, `slowest /healthz ${probes.slowestMs.toFixed(0)} ms`);
    const account = t.router.registry.runtime(MODEL)!.cluster.account;
    await eventually(
      () =>
        t.engines.every((e) => {
          const load = account.load(e.id);
          return load.prefillRequests === 0 && load.decodeRequests === 0;
        }),
      5_000,
      "every lease released",
    );
  } finally {
    await t.close();
  }
});

/**
 * A decode instance's report and our load at its observation, made comparable per protocol
 * (src/cluster/decode_view.ts), then reconciled (reconcile.ts): what the policies see.
 */
import { assertEquals } from "../assert.ts";
import { decodeView } from "../../src/cluster/decode_view.ts";
import type { EngineLoadReport } from "../../src/cluster/engine_load.ts";
import type { InstanceLoad } from "../../src/cluster/load_account.ts";
import { reconcileLoad } from "../../src/cluster/reconcile.ts";

/** Waiting requests of others count 1,000 tokens each. */
function seen(report: EngineLoadReport, ours: InstanceLoad, joiners: number, sentAtOnce: boolean) {
  const view = decodeView(report, ours, joiners, sentAtOnce);
  const load = reconcileLoad({
    local: ours,
    engine: { report: view.report, localAtObservation: view.ours },
    meanUncachedTokens: 1_000,
  });
  return { running: load.runningRequests, waitingTokens: load.waitingPrefillTokens };
}

// Ours: 3 decode leases, 1 a joiner (its prefill runs elsewhere), 1 pulling its KV, 1 decoding.
// Others': 1 decoding, 1 pulling its KV. In all: 5 decode there soon, no prefill waits there.
const OURS: InstanceLoad = { prefillTokens: 0, prefillRequests: 0, decodeRequests: 3 };
const TRUTH = { running: 5, waitingTokens: 0 };

Deno.test("vllm-mooncake on vLLM 0.32: the joiner and both pulls are deferred, and count as running", () => {
  const report = { waitingRequests: 3, deferredWaitingRequests: 3, runningRequests: 2 };
  assertEquals(seen({ ...report, observedAtMs: 0 }, OURS, 1, true), TRUTH);
});

Deno.test("vllm-nixl on vLLM 0.32: the joiner is not sent yet; the pulls are deferred", () => {
  const report = { waitingRequests: 2, deferredWaitingRequests: 2, runningRequests: 2 };
  // The joiner is ours only: 4 on the engine now, ours counted live.
  assertEquals(seen({ ...report, observedAtMs: 0 }, OURS, 1, false), TRUTH);
});

Deno.test("SGLang or vLLM without the reason gauge, sent at once: the joiner and pulls wait", () => {
  // Both pulls look like prefills waiting there (2,000 tokens), and not like decodes: the report
  // cannot tell, and the router does not count which of its decode legs still pull (left alone:
  // docs/compat.md). The joiner, ours, is taken as waiting where the engine shows it.
  const report = { waitingRequests: 3, runningRequests: 2, observedAtMs: 0 };
  assertEquals(seen(report, OURS, 1, true), { running: 3, waitingTokens: 2_000 });
  // Were the joiner taken as not on the engine, it would count as someone else's waiting prefill.
  const asAbsent = seen(report, OURS, 1, false);
  assertEquals(asAbsent.waitingTokens, 3_000);
});

Deno.test("without joiners or deferred requests the report passes through unchanged", () => {
  const report = { waitingRequests: 2, runningRequests: 4, observedAtMs: 0 };
  const ours = { prefillTokens: 500, prefillRequests: 1, decodeRequests: 2 };
  assertEquals(decodeView(report, ours, 0, true), { report, ours });
});

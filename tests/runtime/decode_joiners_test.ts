/**
 * The runtime wires its decode outlook into the cluster's reconciliation: a decode lease whose
 * request still prefills elsewhere is not taken off the other routers' share of the engine's report,
 * wherever the protocol and the engine put it (src/cluster/decode_view.ts).
 */
import { assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { ModelRuntime } from "../../src/runtime/model_runtime.ts";
import { decodeLease } from "../../src/gateway/reservation.ts";

/** d0's candidate with two of our decode leases on it, one of them still prefilling elsewhere. */
async function decodeCandidate(protocol: string, page: string) {
  const config = resolveConfig({
    models: [{
      name: "m",
      tokenizer: { mode: "none" },
      kv: { store: "none" },
      disaggregation: { protocol },
      instances: [
        { id: "p0", url: "http://p0:8000", role: "prefill" },
        { id: "d0", url: "http://d0:8000", role: "decode" },
      ],
    }],
  });
  const runtime = await ModelRuntime.create(config.models[0], {
    fetch: () => Promise.resolve(new Response(page)),
    now: () => performance.now(),
    random: () => 0,
    log: () => {},
  });
  try {
    const leases = [decodeLease(runtime, "d0"), decodeLease(runtime, "d0")];
    const arrived = runtime.decodeOutlook!.expect("d0", performance.now() + 60_000);
    await runtime.cluster.refresh();
    const d0 = runtime.cluster.candidates(() => 0).candidates.find((c) => c.id === "d0")!;
    arrived();
    for (const lease of leases) lease.release();
    return d0;
  } finally {
    await runtime.cluster.stop();
  }
}

Deno.test("vllm-nixl: a decode candidate counts the other routers' requests besides our joiner, not sent yet", async () => {
  // d0 runs 3: 2 of other routers' requests and the one of ours that arrived.
  const d0 = await decodeCandidate(
    "vllm-nixl",
    'vllm:num_requests_running{engine="0"} 3\nvllm:num_requests_waiting{engine="0"} 0\n',
  );
  assertEquals(d0.runningRequests, 2 + 2, "others' 2 and our 2, one still prefilling");
});

Deno.test("vllm-mooncake: our joiner, on the engine as a deferred request, counts once and not as prefill", async () => {
  // d0 runs 3 (2 others', 1 ours) and defers 1: our joiner, waiting for its KV.
  const d0 = await decodeCandidate(
    "vllm-mooncake",
    'vllm:num_requests_running{engine="0"} 3\nvllm:num_requests_waiting{engine="0"} 1\n' +
      'vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} 0\n' +
      'vllm:num_requests_waiting_by_reason{engine="0",reason="deferred"} 1\n',
  );
  assertEquals(d0.runningRequests, 2 + 2);
  assertEquals(d0.waitingPrefillTokens, 0, "no prefill waits there");
});

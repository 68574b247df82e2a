/**
 * The runtime wires its decode outlook into the cluster's reconciliation: a decode lease whose
 * request still prefills elsewhere is not taken off the other routers' share of the engine's report.
 */
import { assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { ModelRuntime } from "../../src/runtime/model_runtime.ts";
import { decodeLease } from "../../src/gateway/reservation.ts";

Deno.test("a disaggregated model's decode candidates count the other routers' requests besides our joiners", async () => {
  const config = resolveConfig({
    models: [{
      name: "m",
      tokenizer: { mode: "none" },
      kv: { store: "none" },
      disaggregation: { protocol: "vllm-nixl" },
      instances: [
        { id: "p0", url: "http://p0:8000", role: "prefill" },
        { id: "d0", url: "http://d0:8000", role: "decode" },
      ],
    }],
  });
  const runtime = await ModelRuntime.create(config.models[0], {
    // d0 runs 3: 2 of other routers' requests and the one of ours that arrived.
    fetch: () =>
      Promise.resolve(
        new Response(
          'vllm:num_requests_running{engine="0"} 3\nvllm:num_requests_waiting{engine="0"} 0\n',
        ),
      ),
    now: () => performance.now(),
    random: () => 0,
    log: () => {},
  });
  try {
    const leases = [decodeLease(runtime, "d0"), decodeLease(runtime, "d0")];
    const arrived = runtime.decodeOutlook!.expect("d0", performance.now() + 60_000);
    await runtime.cluster.refresh();
    const d0 = runtime.cluster.candidates(() => 0).candidates.find((c) => c.id === "d0")!;
    assertEquals(d0.runningRequests, 2 + 2, "others' 2 and our 2, one still prefilling");
    arrived();
    for (const lease of leases) lease.release();
  } finally {
    await runtime.cluster.stop();
  }
});

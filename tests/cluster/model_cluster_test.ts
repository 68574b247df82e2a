import { assert, assertEquals } from "../assert.ts";
import { ManualTime, settle } from "./manual_time.ts";
import { testCluster, testInstance as instance } from "./test_cluster.ts";

const cluster = (onRemoved?: (id: string) => void) => testCluster({ onRemoved });

Deno.test("a drained instance takes no new requests; a removed one goes once its last request ends", () => {
  const removed: string[] = [];
  const c = cluster((id) => removed.push(id));
  c.upsert(instance("a"), "config");
  c.upsert(instance("b"), "config");
  c.drain("a");
  const { candidates } = c.candidates(() => 0);
  assertEquals(candidates.find((x) => x.id === "a")?.healthy, false);
  assertEquals(candidates.find((x) => x.id === "b")?.healthy, true);

  const end = c.begin("b");
  c.remove("b");
  assert(c.get("b"), "still serving its in-flight request");
  assertEquals(c.candidates(() => 0).candidates.map((x) => x.id), ["a"]);
  end();
  end();
  assertEquals(c.get("b"), undefined);
  assertEquals(removed, ["b"]);
});

Deno.test("reconcileMembers() adds, updates and removes only instances of its own origin", () => {
  const c = cluster();
  c.upsert(instance("static"), "config");
  c.reconcileMembers([instance("d1"), instance("d2")], "discovery");
  const result = c.reconcileMembers(
    [instance("d2"), { ...instance("d3"), engine: "sglang" }],
    "discovery",
  );
  assertEquals(result, { added: ["d3"], updated: [], removed: ["d1"] });
  assertEquals(c.entries().map((e) => e.config.id).sort(), ["d2", "d3", "static"]);
});

Deno.test("stop() waits for the probe of an instance added while running, and no timer is left", async () => {
  const time = new ManualTime();
  let answer!: () => void;
  const c = testCluster({
    now: time.now,
    timers: time,
    fetch: () => new Promise((resolve) => (answer = () => resolve(new Response("")))),
  });
  c.start();
  c.upsert(instance("late"), "admin", { initialState: "starting" });
  let stopped = false;
  const stopping = c.stop().then(() => (stopped = true));
  await settle();
  assertEquals(stopped, false, "its probe is still out");
  answer();
  await stopping;
  assertEquals(c.get("late")!.breaker.state, "closed", "the probe's verdict was recorded");
  assertEquals(time.pendingTimers, 0);
});

Deno.test("kvTokensPerRequest() is the engine's KV in use over its running requests, while its report is fresh", async () => {
  let nowMs = 0;
  const pages: Record<string, string> = {};
  const page = (running: number, usage: number, sized = true) =>
    `vllm:num_requests_running{engine="0"} ${running}\nvllm:num_requests_waiting{engine="0"} 0\n` +
    `vllm:kv_cache_usage_perc{engine="0"} ${usage}\n` +
    (sized ? 'vllm:cache_config_info{engine="0",kv_cache_size_tokens="100000"} 1.0\n' : "");
  const c = testCluster({
    now: () => nowMs,
    loadStaleAfterMs: 5_000,
    fetch: (input) => {
      const host = new URL(input instanceof Request ? input.url : String(input)).hostname;
      return Promise.resolve(new Response(pages[host] ?? ""));
    },
  });
  for (const id of ["busy", "idle", "unsized"]) c.upsert(instance(id), "config");
  pages.busy = page(4, 0.5);
  pages.idle = page(0, 0);
  pages.unsized = page(4, 0.5, false);
  await c.refresh();
  assertEquals(c.kvTokensPerRequest("busy"), 0.5 * 100_000 / 4);
  assertEquals(c.kvTokensPerRequest("idle"), undefined, "no batch to average");
  assertEquals(c.kvTokensPerRequest("unsized"), undefined, "no cache size reported");
  nowMs += 6_000;
  assertEquals(c.kvTokensPerRequest("busy"), undefined, "a stale report is not used");
  await c.stop();
});

Deno.test("a decode lease whose request prefills elsewhere is not taken off the others' share the engine reports", async () => {
  const runningFor = async (count?: (id: string) => number) => {
    const c = testCluster({
      ...(count ? { joiners: { count, sentAtOnce: false } } : {}),
      fetch: () =>
        Promise.resolve(
          new Response(
            // 3 running: 2 of other routers' requests and the one of ours that arrived.
            'vllm:num_requests_running{engine="0"} 3\nvllm:num_requests_waiting{engine="0"} 0\n',
          ),
        ),
    });
    c.upsert({ ...instance("d"), role: "decode" }, "config");
    // Our two decode leases: one decoding there, one whose prefill runs elsewhere.
    const leases = [c.account.lease("d", 0), c.account.lease("d", 0)];
    for (const lease of leases) lease.firstToken();
    await c.refresh();
    const running = c.candidates(() => 0).candidates[0].runningRequests;
    for (const lease of leases) lease.release();
    await c.stop();
    return running;
  };
  assertEquals(await runningFor((id) => (id === "d" ? 1 : 0)), 2 + 2, "others' 2 and our 2");
  assertEquals(await runningFor(), 1 + 2, "without it the joiner hides one of the others'");
});

Deno.test("a decode instance's requests waiting for their KV are no prefill work; elsewhere a deferred request still counts", async () => {
  // vLLM 0.32: 3 waiting, of which 2 deferred (on a decode instance: KV arriving from a prefill).
  const page =
    'vllm:num_requests_running{engine="0"} 1\nvllm:num_requests_waiting{engine="0"} 3\n' +
    'vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} 1\n' +
    'vllm:num_requests_waiting_by_reason{engine="0",reason="deferred"} 2\n';
  const c = testCluster({ now: () => 0, fetch: () => Promise.resolve(new Response(page)) });
  c.upsert({ ...instance("d"), role: "decode" }, "config");
  c.upsert({ ...instance("p"), role: "prefill" }, "config");
  c.upsert(instance("n"), "config");
  c.recentPrefill.record(1_000, 0); // others' waiting requests count as 1,000 tokens each
  await c.refresh();
  const waiting = Object.fromEntries(
    c.candidates(() => 0).candidates.map((x) => [x.id, x.waitingPrefillTokens]),
  );
  assertEquals(waiting, { d: 1_000, p: 3_000, n: 3_000 });
  // On the decode instance the deferred are about to decode: running.
  const running = c.candidates(() => 0).candidates.find((x) => x.id === "d")!.runningRequests;
  assertEquals(running, 3);
  await c.stop();
});

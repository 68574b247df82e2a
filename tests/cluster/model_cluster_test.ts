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

import { assert, assertEquals } from "../assert.ts";
import { ModelCluster } from "../../src/cluster/model_cluster.ts";

function cluster(onRemoved?: (id: string) => void) {
  return new ModelCluster({
    model: "m",
    health: {
      intervalMs: 60_000,
      timeoutMs: 100,
      failuresToOpen: 3,
      successesToClose: 2,
      openCooldownMs: 1_000,
    },
    fetch: () => Promise.resolve(new Response("{}")),
    now: () => performance.now(),
    onRemoved,
  });
}

const instance = (id: string) => ({
  id,
  url: `http://${id}:8000`,
  engine: "vllm" as const,
  role: "neutral" as const,
});

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

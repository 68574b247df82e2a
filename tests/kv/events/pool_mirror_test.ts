import { assertEquals } from "../../assert.ts";
import { crossCheck, mirrorLookup, PoolMirror } from "../../../src/kv/events/pool_mirror.ts";
import type { MasterKvEvent, MasterKvEventBatch } from "../../../src/kv/events/master_kv_event.ts";
import type { LookupResult } from "../../../src/kv/types.ts";

const put = (key: string): MasterKvEvent => ({ type: "stored", key });
const del = (key: string): MasterKvEvent => ({ type: "removed", key });
const batch = (seq: number, ...events: MasterKvEvent[]): MasterKvEventBatch => ({
  seq: BigInt(seq),
  events,
});

Deno.test("pool mirror: exact from the master's first batch (seq 1), answering like a lookup", () => {
  const mirror = new PoolMirror();
  assertEquals(mirror.has("a"), undefined);
  assertEquals(mirror.receive(batch(1, put("a"), put("b"))), false);
  assertEquals(mirror.receive(batch(2, del("b"), put("c"))), false);
  assertEquals(mirror.state, "exact");
  const answer = mirrorLookup(mirror, ["a", "b", "c"]);
  assertEquals([...answer.locations].map(([k, l]) => [k, l.present]), [
    ["a", true],
    ["b", false],
    ["c", true],
  ]);
  assertEquals([answer.outcome, answer.batches], ["mirror", 0]);
});

Deno.test("pool mirror: joining mid-stream needs a snapshot; batches meanwhile are kept", () => {
  const mirror = new PoolMirror();
  assertEquals(mirror.receive(batch(40, put("x"))), true);
  assertEquals(mirror.state, "untrusted");
  const ticket = mirror.beginSnapshot();
  mirror.receive(batch(41, del("old"), put("y")));
  mirror.snapshot(["old", "z"], ticket);
  assertEquals(mirror.state, "exact");
  assertEquals(["x", "y", "z", "old"].map((k) => mirror.has(k)), [true, true, true, false]);
  mirror.receive(batch(42, put("w")));
  assertEquals(mirror.has("w"), true);
});

Deno.test("pool mirror: a gap makes it untrusted until the next snapshot", () => {
  const mirror = new PoolMirror();
  mirror.receive(batch(1, put("a")));
  assertEquals(mirror.receive(batch(5, put("e"))), true);
  assertEquals(mirror.state, "untrusted");
  assertEquals(mirror.counters.gaps, 1);
  mirror.snapshot(["a", "b", "c", "d"], mirror.beginSnapshot());
  assertEquals(mirror.state, "exact");
  assertEquals(mirror.has("e"), true, "the batch that showed the gap is kept");
});

Deno.test("pool mirror: losing the publisher voids it, and a snapshot under way with it", () => {
  const mirror = new PoolMirror();
  mirror.receive(batch(1, put("a")));
  const ticket = mirror.beginSnapshot();
  mirror.invalidate();
  mirror.snapshot(["a"], ticket);
  assertEquals(mirror.state, "untrusted");
  mirror.snapshot(null, mirror.beginSnapshot());
  assertEquals(mirror.state, "untrusted");
  assertEquals(mirror.counters.snapshotsFailed, 1);
  mirror.snapshot(["a"], mirror.beginSnapshot());
  assertEquals(mirror.state, "exact");
});

Deno.test("pool mirror: a master that starts again (seq 1) empties it", () => {
  const mirror = new PoolMirror();
  mirror.receive(batch(1, put("a")));
  mirror.receive(batch(2, put("b")));
  mirror.receive(batch(1, put("c")));
  assertEquals(["a", "b", "c"].map((k) => mirror.has(k)), [false, false, true]);
  assertEquals(mirror.counters.restarts, 1);
});

Deno.test("pool mirror: more keys than maxKeys drop it instead of growing", () => {
  const mirror = new PoolMirror({ maxKeys: 2 });
  mirror.receive(batch(1, put("a"), put("b"), put("c")));
  assertEquals(mirror.state, "untrusted");
  assertEquals(mirror.size, 0);
});

Deno.test("pool mirror: the cross-check counts each key the master's answer disagrees on", () => {
  const mirror = new PoolMirror();
  mirror.receive(batch(1, put("a"), put("b")));
  const mirrored = mirrorLookup(mirror, ["a", "b", "c"]);
  const location = (present: boolean) => ({
    present,
    memoryHosts: present ? ["10.0.0.1"] : [],
    localDiskHosts: [],
    sharedDisk: false,
  });
  const stored: LookupResult = {
    outcome: "ok",
    locations: new Map([["a", location(true)], ["b", location(false)], ["c", location(false)]]),
    keysQueried: 3,
    batches: 1,
    attempts: 1,
    elapsedMs: 1,
  };
  crossCheck(mirror, mirrored, stored);
  assertEquals(mirror.lookups, { answered: 0, crossChecked: 1, keysAgreed: 2, keysDisagreed: 1 });
  crossCheck(mirror, mirrored, { ...stored, outcome: "deadline" });
  assertEquals(mirror.lookups.crossChecked, 1, "an incomplete answer proves nothing");
});

Deno.test("pool mirror: a connection's first batch after its snapshot follows on without another", () => {
  const mirror = new PoolMirror();
  mirror.snapshot(["a"], mirror.beginSnapshot()); // taken on connecting; nothing came meanwhile
  assertEquals(mirror.receive(batch(57, put("b"))), false, "what came before was in the keys");
  assertEquals([mirror.state, mirror.has("a"), mirror.has("b")], ["exact", true, true]);
  assertEquals(mirror.receive(batch(59, put("d"))), true, "a gap after it still counts");
  // On the next connection, the same again.
  mirror.invalidate();
  mirror.snapshot(["a", "b", "c"], mirror.beginSnapshot());
  assertEquals(mirror.receive(batch(90, del("a"))), false);
  assertEquals([mirror.state, mirror.has("a"), mirror.has("c")], ["exact", false, true]);
});

Deno.test("pool mirror: a batch lost during a retried snapshot keeps it untrusted", () => {
  const mirror = new PoolMirror();
  mirror.receive(batch(1, put("a")));
  mirror.receive(batch(2, put("b")));
  mirror.snapshot(null, mirror.beginSnapshot()); // e.g. a cross-check asked for one, and it failed
  assertEquals(mirror.state, "untrusted");
  const ticket = mirror.beginSnapshot();
  mirror.receive(batch(4, put("d"))); // 3 was lost: maybe after the keys below were read
  mirror.snapshot(["a", "b"], ticket);
  assertEquals(mirror.state, "untrusted");
});

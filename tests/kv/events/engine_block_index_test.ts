import { assertEquals } from "../../assert.ts";
import { EngineBlockIndex } from "../../../src/kv/events/engine_block_index.ts";
import type { EngineKvEvent, EngineKvEventBatch } from "../../../src/kv/events/engine_kv_event.ts";

const stored = (...blocks: string[]): EngineKvEvent => ({ type: "stored", blocks });
const removed = (...blocks: string[]): EngineKvEvent => ({ type: "removed", blocks });
const batch = (seq: number, ...events: EngineKvEvent[]): EngineKvEventBatch => ({
  seq: BigInt(seq),
  events,
});
/** A batch of the publisher whose batches carry timestamp `ts`. */
const batchAt = (ts: number, seq: number, ...events: EngineKvEvent[]): EngineKvEventBatch => ({
  ...batch(seq, ...events),
  ts,
});

Deno.test("engine index: exact from the publisher's first batch, prefixes counted from block 0", () => {
  const index = new EngineBlockIndex();
  assertEquals(index.state, "untrusted");
  assertEquals(index.prefixBlocks(["a"]), undefined);
  assertEquals(index.receive(batch(0, stored("a", "b", "c"))), { resync: false });
  assertEquals(index.receive(batch(1, stored("x"), removed("b"))), { resync: false });
  assertEquals(index.state, "exact");
  assertEquals(index.prefixBlocks(["a", "b", "c"]), 1);
  assertEquals(index.prefixBlocks(["x"]), 1);
  assertEquals(index.prefixBlocks(["c"]), 1);
  assertEquals(index.prefixBlocks(["q", "a"]), 0);
});

Deno.test("engine index: a block on two media stays until both removed it", () => {
  const index = new EngineBlockIndex();
  index.receive(batch(0, stored("a"), { type: "stored", blocks: ["a"], medium: "CPU" }));
  index.receive(batch(1, removed("a")));
  assertEquals(index.prefixBlocks(["a"]), 1, "still on the CPU tier");
  index.receive(batch(2, { type: "removed", blocks: ["a"], medium: "CPU" }));
  assertEquals(index.prefixBlocks(["a"]), 0);
  assertEquals(index.size, 0);
});

Deno.test("engine index: a gap asks for a replay from the last batch applied and fills it", () => {
  const index = new EngineBlockIndex();
  index.receive(batch(0, stored("a")));
  assertEquals(index.receive(batch(3, stored("d"))), { resync: true, from: 0n });
  assertEquals(index.state, "untrusted");
  assertEquals(index.prefixBlocks(["a"]), undefined);
  // Live batches during the replay are held, then applied after it in order.
  assertEquals(index.receive(batch(4, removed("a"))), { resync: false });
  const replay = [batch(2, stored("c")), batch(0, stored("a")), batch(1, stored("b"))];
  assertEquals(index.replayed([...replay, batch(3, stored("d"))]), { resync: false });
  assertEquals(index.state, "exact");
  assertEquals(index.prefixBlocks(["b", "c", "d"]), 3);
  assertEquals(index.prefixBlocks(["a"]), 0, "the held removal came after the replay");
  assertEquals(index.counters.gaps, 1);
  assertEquals(index.counters.resynced, 1);
});

Deno.test("engine index: a replay that cannot fill the gap leaves it untrusted until a clear", () => {
  const index = new EngineBlockIndex();
  index.receive(batch(0, stored("a")));
  index.receive(batch(5, stored("f")));
  index.replayed([batch(3, stored("d")), batch(4, stored("e"))]); // 0 to 2 left the buffer
  assertEquals(index.state, "untrusted");
  assertEquals(index.counters.resyncFailed, 1);
  index.receive(batch(6, { type: "cleared" }, stored("g")));
  assertEquals(index.state, "exact");
  assertEquals(index.prefixBlocks(["g"]), 1);
  assertEquals(index.prefixBlocks(["a"]), 0, "the clear emptied it");
});

Deno.test("engine index: no replay at all (no endpoint) leaves it untrusted", () => {
  const index = new EngineBlockIndex();
  index.receive(batch(0, stored("a")));
  index.receive(batch(2, stored("c")));
  index.replayed(null);
  assertEquals(index.state, "untrusted");
});

Deno.test("engine index: joining mid-history replays the whole buffer from seq 0", () => {
  const index = new EngineBlockIndex();
  const live = batch(7, stored("h"));
  assertEquals(index.receive(live), { resync: true, from: 0n });
  // The buffer ends with the batch that was held: it counts once.
  index.replayed([...Array.from({ length: 7 }, (_, i) => batch(i, stored(`b${i}`))), live]);
  assertEquals(index.state, "exact");
  assertEquals(index.prefixBlocks(["b0", "b1", "h"]), 3);
});

Deno.test("engine index: a publisher that starts again at seq 0 empties the mirror", () => {
  const index = new EngineBlockIndex();
  index.receive(batch(0, stored("a")));
  index.receive(batch(1, stored("b")));
  index.receive(batch(0, stored("z")));
  assertEquals(index.state, "exact");
  assertEquals(index.prefixBlocks(["a"]), 0);
  assertEquals(index.prefixBlocks(["z"]), 1);
  assertEquals(index.counters.restarts, 1);
});

Deno.test("engine index: a restart whose first batches were missed resyncs from 0", () => {
  const index = new EngineBlockIndex();
  for (let i = 0; i <= 9; i++) index.receive(batch(i, stored(`old${i}`)));
  assertEquals(index.receive(batch(2, stored("new2"))), { resync: true, from: 0n });
  index.replayed([batch(0, stored("new0")), batch(1, stored("new1")), batch(2, stored("new2"))]);
  assertEquals(index.state, "exact");
  assertEquals(index.prefixBlocks(["old0"]), 0);
  assertEquals(index.prefixBlocks(["new0", "new1", "new2"]), 3);
});

Deno.test("engine index: growing past maxBlocks drops the mirror instead of memory", () => {
  const index = new EngineBlockIndex({ maxBlocks: 3 });
  index.receive(batch(0, stored("a", "b", "c")));
  assertEquals(index.state, "exact");
  index.receive(batch(1, stored("d")));
  assertEquals(index.state, "untrusted");
  assertEquals(index.size, 0);
  assertEquals(index.counters.overflows, 1);
});

Deno.test("engine index: live batches beyond maxPending during a replay are counted and lost", () => {
  const index = new EngineBlockIndex({ maxPending: 2 });
  index.receive(batch(0, stored("a")));
  index.receive(batch(2, stored("c"))); // held: 1 of 2
  index.receive(batch(3, stored("d"))); // held: 2 of 2
  index.receive(batch(4, stored("e"))); // dropped
  assertEquals(index.counters.droppedPending, 1);
  index.replayed([0, 1, 2, 3].map((seq) => batch(seq, stored(`b${seq}`))));
  assertEquals(index.state, "exact", "the replay covered up to 3; 4 is next");
  assertEquals(index.receive(batch(5, stored("f"))), { resync: true, from: 3n });
});

Deno.test("engine index: a full resync forgets the mirror and rebuilds it from the buffer", () => {
  const index = new EngineBlockIndex();
  index.receive(batch(0, stored("a")));
  index.receive(batch(4, stored("e")));
  index.replayed([batch(3, stored("d")), batch(4, stored("e"))]);
  assertEquals(index.state, "untrusted");
  assertEquals(index.beginResync(), 0n, "a mirror that is not whole asks for everything");
  assertEquals(index.beginResync(), undefined, "one replay at a time");
  index.replayed([0, 1, 2, 3, 4].map((i) => batch(i, stored(`r${i}`))));
  assertEquals(index.state, "exact");
  assertEquals(index.prefixBlocks(["r0", "r1"]), 2);
  assertEquals(index.prefixBlocks(["a"]), 0);
});

Deno.test("engine index: a catch-up that shows the last batch again keeps the mirror", () => {
  const index = new EngineBlockIndex();
  index.receive(batchAt(5.5, 0, stored("a")));
  index.receive(batchAt(5.5, 1, stored("b")));
  assertEquals(index.beginResync(), 1n, "from the last batch, included");
  assertEquals(index.state, "untrusted", "live batches are held meanwhile");
  index.receive(batchAt(5.5, 3, stored("d")));
  const replay = [batchAt(5.5, 1, stored("b")), batchAt(5.5, 2, stored("c"))];
  assertEquals(index.replayed(replay), { resync: false });
  assertEquals(index.state, "exact");
  assertEquals(index.prefixBlocks(["a", "b", "c", "d"]), 4);
  assertEquals(index.counters.restarts, 0);
});

Deno.test("engine index: a catch-up answered by another publisher under the same number restarts the mirror", () => {
  const index = new EngineBlockIndex();
  for (let seq = 0; seq <= 3; seq++) index.receive(batchAt(1, seq, stored(`old${seq}`)));
  index.disconnected();
  assertEquals(index.state, "untrusted", "a lost connection is not trusted");
  assertEquals(index.beginResync(), 3n);
  // The restarted engine has published 0..4: batch 3 is its own, made at another time.
  const restarted = [0, 1, 2, 3, 4].map((seq) => batchAt(2, seq, stored(`new${seq}`)));
  assertEquals(index.replayed(restarted.slice(3)), { resync: true, from: 0n });
  assertEquals(index.counters.restarts, 1);
  assertEquals(index.state, "untrusted");
  index.receive(batchAt(2, 5, stored("new5"))); // live meanwhile: held
  assertEquals(index.replayed(restarted), { resync: false });
  assertEquals(index.state, "exact");
  assertEquals(index.prefixBlocks(["old0"]), 0);
  assertEquals(index.prefixBlocks([0, 1, 2, 3, 4, 5].map((seq) => `new${seq}`)), 6);
});

Deno.test("engine index: a catch-up answered with nothing from the last batch on restarts the mirror", () => {
  const index = new EngineBlockIndex();
  for (let seq = 0; seq <= 9; seq++) index.receive(batchAt(1, seq, stored(`old${seq}`)));
  index.disconnected();
  assertEquals(index.beginResync(), 9n);
  // The restarted engine's publisher is at seq 2: nothing from 9 on.
  assertEquals(index.replayed([]), { resync: true, from: 0n });
  index.replayed([0, 1, 2].map((seq) => batchAt(2, seq, stored(`new${seq}`))));
  assertEquals(index.state, "exact");
  assertEquals(index.prefixBlocks(["old0"]), 0);
  assertEquals(index.prefixBlocks(["new0", "new1", "new2"]), 3);
  assertEquals(index.counters.restarts, 1);
});

Deno.test("engine index: after a disconnect, batches that merely continue the numbers are not trusted", () => {
  const index = new EngineBlockIndex();
  index.receive(batchAt(1, 0, stored("a")));
  index.disconnected();
  index.receive(batchAt(2, 1, stored("b"))); // without a replay nothing tells whose batch it is
  assertEquals(index.state, "untrusted");
  index.receive(batchAt(2, 2, { type: "cleared" }, stored("c")));
  assertEquals(index.state, "exact", "a clear makes the mirror whole from the live publisher");
  assertEquals(index.prefixBlocks(["c"]), 1);
  assertEquals(index.prefixBlocks(["a"]), 0);
});

Deno.test("engine index: a replay begun before a disconnect confirms nothing", () => {
  const index = new EngineBlockIndex();
  index.receive(batchAt(1, 0, stored("a")));
  assertEquals(index.beginResync(), 0n);
  index.disconnected(); // while the catch-up was on its way
  index.replayed([batchAt(1, 0, stored("a"))]);
  assertEquals(index.state, "untrusted");
  assertEquals(index.beginResync(), 0n, "the next catch-up asks again");
  index.replayed([batchAt(1, 0, stored("a")), batchAt(1, 1, stored("b"))]);
  assertEquals(index.state, "exact");
  assertEquals(index.prefixBlocks(["a", "b"]), 2);
  assertEquals(index.counters.disconnects, 1);
});

Deno.test("engine index: a live copy of a batch a replay applied is ignored, not taken for a restart", () => {
  const index = new EngineBlockIndex();
  index.receive(batchAt(1, 0, stored("a")));
  assertEquals(index.receive(batchAt(1, 2, stored("c"))), { resync: true, from: 0n });
  index.replayed([0, 1, 2, 3].map((seq) => batchAt(1, seq, stored(`b${seq}`))));
  // The live copies of 3 come after the replay that had it already.
  assertEquals(index.receive(batchAt(1, 3, stored("b3"))), { resync: false });
  assertEquals(index.counters.duplicates, 1);
  assertEquals(index.state, "exact");
  assertEquals(index.counters.restarts, 0);
  // The same number made at another time is another publisher's.
  assertEquals(index.receive(batchAt(9, 3, stored("x"))), { resync: true, from: 0n });
  assertEquals(index.counters.restarts, 1);
});

import { assertEquals } from "../assert.ts";
import { LEASES_PER_PART, snapshotParts } from "../../src/cluster/lease_snapshot.ts";
import type { LiveLease } from "../../src/cluster/shared_facts.ts";

function live(ids: number[]): LiveLease[] {
  return ids.map((id) => ({
    model: "m",
    instance: "gpu-0",
    id: `${id}`,
    tokens: 10,
    decoding: false,
  }));
}

Deno.test("with no lease out, the snapshot is one empty part covering every id handed out", () => {
  assertEquals(snapshotParts([], 42), [{ from: 0, to: 42, leases: [] }]);
});

Deno.test("live leases are cut into parts of at most 64 whose ranges cover every id, in order", () => {
  const ids = Array.from({ length: 150 }, (_, i) => 3 * i + 1); // 1, 4, 7, ... 448
  const parts = snapshotParts(live(ids), 500);
  assertEquals(parts.map((p) => p.leases.length), [LEASES_PER_PART, LEASES_PER_PART, 22]);
  assertEquals(parts.map((p) => [p.from, p.to]), [[0, 193], [193, 385], [385, 500]]);
  for (const part of parts) {
    for (const lease of part.leases) {
      const id = Number(lease.id);
      assertEquals(id >= part.from && id < part.to, true, `${id} in [${part.from}, ${part.to})`);
    }
  }
  assertEquals(parts.flatMap((p) => p.leases.map((l) => Number(l.id))), ids);
});

Deno.test("a part size can be given", () => {
  const parts = snapshotParts(live([0, 1, 2]), 3, 2);
  assertEquals(parts.map((p) => [p.from, p.to, p.leases.length]), [[0, 2, 2], [2, 3, 1]]);
});

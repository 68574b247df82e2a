import { strictEqual } from "node:assert/strict";
import { hasRoom, heldRefusal, holdsOnArrival } from "../../src/scheduling/late_binding.ts";
import type { Candidate } from "../../src/scheduling/types.ts";

const candidate = (id: string, waiting: number, healthy = true): Candidate => ({
  id,
  healthy,
  localPrefixTokens: 0,
  waitingPrefillTokens: waiting,
  waitingPrefillRequests: waiting > 0 ? 1 : 0,
  runningRequests: 0,
});

Deno.test("an instance has room at or under the bound; an unhealthy one never counts", () => {
  strictEqual(hasRoom([candidate("a", 9000), candidate("b", 8192)], 8192), true);
  strictEqual(hasRoom([candidate("a", 9000), candidate("b", 8193)], 8192), false);
  strictEqual(hasRoom([candidate("a", 0, false), candidate("b", 1)], 0), false);
  strictEqual(hasRoom([candidate("a", 0, false), candidate("b", 0)], 0), true);
  strictEqual(hasRoom([], 0), false);
});

Deno.test("an admitted request is held without room or behind others held, never without a bound", () => {
  const busy = [candidate("a", 900), candidate("b", 700)];
  strictEqual(holdsOnArrival(busy, undefined, 5), false);
  strictEqual(holdsOnArrival(busy, 0, 0), true);
  strictEqual(holdsOnArrival(busy, 800, 0), false);
  strictEqual(holdsOnArrival(busy, 800, 1), true, "first come first served");
  const down = [candidate("a", 900, false)];
  strictEqual(holdsOnArrival(down, 0, 3), false, "none healthy: nothing to wait for");
  strictEqual(holdsOnArrival([], 0, 0), false);
  const refusal = heldRefusal(800);
  strictEqual(refusal.status, 429);
  strictEqual(refusal.reason, "load_threshold");
  strictEqual(refusal.message.includes("800"), true);
});

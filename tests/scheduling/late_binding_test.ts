import { strictEqual } from "node:assert/strict";
import { hasRoom } from "../../src/scheduling/late_binding.ts";
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

import { assert, assertEquals } from "../assert.ts";
import { FairShare } from "../../src/scheduling/fair_share.ts";

const WEIGHTS: Record<string, number> = { a: 1, b: 1, heavy: 3 };
const share = () => new FairShare((tenant) => WEIGHTS[tenant] ?? 1, 5_000);

Deno.test("FairShare admits everything until the model's admission refuses something", () => {
  const fair = share();
  fair.hold("m", "a", 1_000);
  fair.hold("m", "b", 10);
  assert(fair.allows("m", "a", 1_000, 0));
});

Deno.test("under refusals a tenant over its weighted share yields, the others do not", () => {
  const fair = share();
  fair.hold("m", "a", 200);
  fair.hold("m", "b", 100);
  fair.noteRefusal("m", 1_000);
  assert(!fair.allows("m", "a", 20, 1_000), "a would hold 220 of 320, over its half");
  assert(fair.allows("m", "b", 20, 1_000), "b would hold 120 of 320");
  assert(fair.allows("m", "a", 20, 6_001), "the refusal window has passed");
  assert(fair.allows("other-model", "a", 20, 1_000), "shares are per model");
});

Deno.test("weights set the share, and a tenant alone shares with nobody", () => {
  const fair = share();
  const releaseHeavy = fair.hold("m", "heavy", 200);
  fair.hold("m", "b", 100);
  fair.noteRefusal("m", 0);
  assert(fair.allows("m", "heavy", 20, 0), "220 of 320 is within three quarters");
  const releaseB = fair.hold("m", "b", 0);
  releaseB();
  releaseB(); // releasing twice changes nothing
  assertEquals(fair.allows("m", "heavy", 1_000, 0), false);
  releaseHeavy();
  assert(fair.allows("m", "b", 1_000, 0), "b alone: nothing to share");
});

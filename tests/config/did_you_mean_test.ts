import { assertEquals } from "../assert.ts";
import { closestName, didYouMean, editDistance } from "../../src/config/did_you_mean.ts";

Deno.test("edit distance counts insertions, deletions and substitutions", () => {
  assertEquals(editDistance("", "abc"), 3);
  assertEquals(editDistance("kitten", "sitting"), 3);
  assertEquals(editDistance("same", "same"), 0);
});

Deno.test("a typo finds its name; an unrelated word finds none", () => {
  const known = ["cache_aware", "round_robin", "least_load"];
  assertEquals(closestName("cache_awre", known), "cache_aware");
  assertEquals(closestName("Least_Load", known), "least_load");
  assertEquals(closestName("bogus", known), undefined);
  assertEquals(didYouMean("roundrobin", known), ' (did you mean "round_robin"?)');
  assertEquals(didYouMean("xyz", known), "");
});

import { assertEquals } from "../assert.ts";
import { sharedTextPrefix, sharedTokenPrefix } from "../../src/openai/batch_prompt.ts";

Deno.test("sharedTokenPrefix() is what every list begins with", () => {
  assertEquals(sharedTokenPrefix([[1, 2, 3], [1, 2, 4], [1, 2]]), [1, 2]);
  assertEquals(sharedTokenPrefix([[1, 2, 3]]), [1, 2, 3]);
  assertEquals(sharedTokenPrefix([[1, 2], [3]]), []);
  assertEquals(sharedTokenPrefix([[7, 7], [7, 7]]), [7, 7]);
  assertEquals(sharedTokenPrefix([]), []);
});

Deno.test("sharedTextPrefix() is what every text begins with", () => {
  assertEquals(sharedTextPrefix(["abcd", "abce", "abx"]), "ab");
  assertEquals(sharedTextPrefix(["same", "same"]), "same");
  assertEquals(sharedTextPrefix(["x", "y"]), "");
  assertEquals(sharedTextPrefix(["only"]), "only");
});

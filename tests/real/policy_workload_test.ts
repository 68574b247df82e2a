import { assertEquals } from "../assert.ts";
import { DOCUMENTS, makeWorkload } from "./policy_workload.ts";

// A word counts as a token: the sizes, not the tokenizer, are what is tested here.
const countWords = (text: string) => text.split(" ").length;

Deno.test("bench:policies workloads pick from the documents asked for, the same for a seed", () => {
  const twelve = makeWorkload({ seed: 24, requests: 200 }, countWords);
  assertEquals(twelve.documents.length, DOCUMENTS);
  const forty = makeWorkload({ seed: 24, requests: 200, documents: 40 }, countWords);
  assertEquals(forty.documents.length, 40);
  assertEquals(new Set(forty.requests.map((r) => r.doc)).size > DOCUMENTS, true);
  assertEquals(forty.requests.every((r) => r.doc >= 0 && r.doc < 40), true);
  // Asking for the default changes nothing: the runs in the docs stay repeatable.
  assertEquals(makeWorkload({ seed: 24, requests: 200, documents: DOCUMENTS }, countWords), twelve);
});

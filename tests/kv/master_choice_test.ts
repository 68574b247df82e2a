import { deepStrictEqual, strictEqual } from "node:assert/strict";
import {
  attemptBudget,
  type MasterVerdict,
  newTrail,
  nextMaster,
  recordAttempt,
  verdictOf,
} from "../../src/kv/master_choice.ts";

const A = "http://a:9003";
const B = "http://b:9003";
const C = "http://c:9003";

Deno.test("verdictOf: a standby's 503 and a wrong port's 404 mean 'not serving', 400 stops, 5xx retries", () => {
  strictEqual(verdictOf(200, true), "served");
  strictEqual(verdictOf(200, false), "failing", "a 200 that does not parse is retried");
  strictEqual(verdictOf(503, false), "not_serving");
  strictEqual(verdictOf(404, false), "not_serving");
  strictEqual(verdictOf(400, false), "bad_request");
  strictEqual(verdictOf(500, false), "failing");
  strictEqual(verdictOf(undefined, false), "unreachable");
});

/** The masters a batch visits when each answers with the given verdicts (in visit order). */
function visits(
  urls: string[],
  answers: Record<string, MasterVerdict[]>,
  budget = attemptBudget(3, urls.length),
): string[] {
  const trail = newTrail();
  const seen: string[] = [];
  let url: string | undefined = urls[0];
  while (url !== undefined && seen.length < budget) {
    seen.push(url);
    const verdict = answers[url]?.shift() ?? "served";
    recordAttempt(trail, url, verdict);
    url = nextMaster(urls, url, verdict, trail);
  }
  return seen;
}

Deno.test("nextMaster never asks a standby twice: the batch moves on to the next master", () => {
  deepStrictEqual(visits([A, B], { [A]: ["not_serving"] }), [A, B]);
  deepStrictEqual(visits([A, B, C], { [A]: ["not_serving"], [B]: ["not_serving"] }), [A, B, C]);
});

Deno.test("nextMaster stops once every master said it does not serve", () => {
  deepStrictEqual(visits([A, B], { [A]: ["not_serving"], [B]: ["not_serving"] }), [A, B]);
  deepStrictEqual(visits([A], { [A]: ["not_serving", "not_serving"] }), [A], "a lone standby once");
});

Deno.test("nextMaster passes over an unreachable master, and comes back to it when nothing else is left", () => {
  deepStrictEqual(visits([A, B], { [A]: ["unreachable"] }), [A, B]);
  deepStrictEqual(
    visits([A, B], { [A]: ["unreachable", "unreachable"], [B]: ["not_serving"] }),
    [A, B, A, A],
    "the standby is not asked again; the unreachable one is retried within the budget",
  );
  deepStrictEqual(visits([A], { [A]: ["unreachable", "unreachable", "unreachable"] }), [A, A, A]);
});

Deno.test("nextMaster retries a failing master where it is, and stops on a 400", () => {
  deepStrictEqual(visits([A, B], { [A]: ["failing", "failing"] }), [A, A, A]);
  deepStrictEqual(visits([A, B], { [A]: ["bad_request"] }), [A]);
});

Deno.test("nextMaster starts from the master after the one that failed, in configured order", () => {
  const trail = newTrail();
  recordAttempt(trail, B, "not_serving");
  strictEqual(nextMaster([A, B, C], B, "not_serving", trail), C);
});

Deno.test("attemptBudget: the retries on one master plus one try on each other master", () => {
  strictEqual(attemptBudget(3, 1), 3);
  strictEqual(attemptBudget(3, 3), 5);
  strictEqual(attemptBudget(0, 1), 1);
});

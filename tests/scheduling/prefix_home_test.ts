import { assert, assertEquals } from "../assert.ts";
import {
  heldPrefixTokens,
  homeOf,
  unheldBlockKey,
  withHomeKey,
} from "../../src/scheduling/prefix_home.ts";
import type { Candidate } from "../../src/scheduling/types.ts";

const instance = (id: string, local = 0, healthy = true): Candidate => ({
  id,
  healthy,
  localPrefixTokens: local,
  waitingPrefillTokens: 0,
  runningRequests: 0,
});
const eight = Array.from({ length: 8 }, (_, i) => instance(`engine-${i}`));

Deno.test("heldPrefixTokens: the longest prefix a healthy instance or the pool holds, short of the last token", () => {
  const candidates = [instance("a", 4_000), instance("b", 9_000, false)];
  assertEquals(
    heldPrefixTokens({ promptTokens: 10_000, poolPrefixTokens: 2_000 }, candidates),
    4_000,
  );
  assertEquals(
    heldPrefixTokens({ promptTokens: 10_000, poolPrefixTokens: 12_000 }, candidates),
    9_999,
  );
});

Deno.test("unheldBlockKey: the key of the first block past the held tokens", () => {
  const keys = ["k0", "k1", "k2"];
  const keyAt = (i: number) => keys[i];
  assertEquals(unheldBlockKey(keyAt, 256, 0), "k0");
  assertEquals(unheldBlockKey(keyAt, 256, 255), "k0");
  assertEquals(unheldBlockKey(keyAt, 256, 512), "k2");
  assertEquals(unheldBlockKey(keyAt, 256, 768), undefined, "past the last block");
  assertEquals(unheldBlockKey(keyAt, 0, 0), undefined, "no block size");
});

Deno.test("homeOf: the same key always has the same home, and keys spread over the instances", () => {
  assertEquals(homeOf("doc", eight), homeOf("doc", [...eight].reverse()));
  const counts = new Map<string, number>();
  for (let k = 0; k < 8_000; k++) {
    const home = homeOf(k, eight)!;
    counts.set(home, (counts.get(home) ?? 0) + 1);
  }
  assertEquals(counts.size, 8);
  for (const [id, n] of counts) assert(n > 800 && n < 1_200, `${id}: ${n} of 8000`);
});

Deno.test("homeOf: an instance lost moves only the keys it was home to; unhealthy ones are never home", () => {
  const lost = eight.map((c) => c.id === "engine-3" ? { ...c, healthy: false } : c);
  let moved = 0;
  for (let k = 0; k < 2_000; k++) {
    const before = homeOf(`key-${k}`, eight)!;
    const after = homeOf(`key-${k}`, lost)!;
    assert(after !== "engine-3");
    if (before !== after) {
      assertEquals(before, "engine-3");
      moved++;
    }
  }
  assert(moved > 150 && moved < 350, `${moved} moved`);
  assertEquals(homeOf("x", [instance("a", 0, false)]), undefined);
});

Deno.test("withHomeKey: the request gains the key past what the candidates hold, or stays as it was", () => {
  const keys = [10, 11, 12, 13];
  const keyAt = (i: number) => keys[i];
  const request = { promptTokens: 1_000, poolPrefixTokens: 0 };
  assertEquals(withHomeKey(request, [instance("a", 512)], keyAt, 256).homeKey, 12);
  assertEquals(withHomeKey({ ...request, poolPrefixTokens: 768 }, [], keyAt, 256).homeKey, 13);
  assertEquals(
    withHomeKey({ ...request, promptTokens: 2_000 }, [instance("a", 1_024)], keyAt, 256)
      .homeKey,
    undefined,
  );
  // Held whole but the last token (always recomputed): nothing new, so no home.
  const whole = { promptTokens: 1_025, poolPrefixTokens: 0 };
  assertEquals(withHomeKey(whole, [instance("a", 1_024)], keyAt, 256).homeKey, undefined);
});

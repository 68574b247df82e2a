import { assertEquals } from "../assert.ts";
import { LoadAccount } from "../../src/cluster/load_account.ts";

Deno.test("a lease adds uncached prefill tokens at dispatch and moves to decode at the first token", () => {
  const account = new LoadAccount({ now: () => 0 });
  const lease = account.lease("a", 1500);
  assertEquals(account.load("a"), { prefillTokens: 1500, prefillRequests: 1, decodeRequests: 0 });
  lease.firstToken();
  assertEquals(account.load("a"), { prefillTokens: 0, prefillRequests: 0, decodeRequests: 1 });
  lease.release();
  assertEquals(account.load("a"), { prefillTokens: 0, prefillRequests: 0, decodeRequests: 0 });
});

Deno.test("a lease of n sequences counts n decoding, from its first token (or its expiry) to its end", () => {
  const clock = { t: 0 };
  const account = new LoadAccount({ now: () => clock.t, expireAfterMs: 1_000 });
  const lease = account.lease("a", 900, { sequences: 3 });
  assertEquals(lease.sequences, 3);
  assertEquals(account.load("a"), { prefillTokens: 900, prefillRequests: 1, decodeRequests: 0 });
  lease.firstToken();
  assertEquals(account.load("a"), { prefillTokens: 0, prefillRequests: 0, decodeRequests: 3 });
  lease.release();
  assertEquals(account.load("a").decodeRequests, 0);
  const stuck = account.lease("a", 10, { sequences: 2 });
  clock.t = 5_000;
  assertEquals(account.load("a").decodeRequests, 2, "expired into decoding with its sequences");
  stuck.release();
  assertEquals(account.load("a").decodeRequests, 0);
  assertEquals(account.lease("b", 0, { sequences: 0 }).sequences, 1, "at least one");
});

Deno.test("a lease is released exactly once, whatever calls it again", () => {
  const account = new LoadAccount({ now: () => 0 });
  const a = account.lease("a", 100);
  const b = account.lease("a", 200);
  a.release();
  a.release();
  a.firstToken();
  assertEquals(account.load("a"), { prefillTokens: 200, prefillRequests: 1, decodeRequests: 0 });
  b.firstToken();
  b.firstToken();
  b.release();
  b.release();
  assertEquals(account.load("a"), { prefillTokens: 0, prefillRequests: 0, decodeRequests: 0 });
  assertEquals(a.released && b.released, true);
});

Deno.test("prefill entries with no first token in time are expired and counted, then released once", () => {
  let now = 0;
  const account = new LoadAccount({ now: () => now, expireAfterMs: 10_000 });
  const stuck = account.lease("a", 4096);
  now = 9_999;
  assertEquals(account.load("a").prefillTokens, 4096);
  now = 10_000;
  assertEquals(account.load("a"), { prefillTokens: 0, prefillRequests: 0, decodeRequests: 1 });
  assertEquals(account.expiredTotal, 1);
  stuck.firstToken(); // late: nothing to move
  stuck.release();
  assertEquals(account.load("a"), { prefillTokens: 0, prefillRequests: 0, decodeRequests: 0 });
});

Deno.test("expire() drops every lease past the bound and keeps the younger ones, whatever ended in between", () => {
  let now = 0;
  const account = new LoadAccount({ now: () => now, expireAfterMs: 10_000 });
  const first = account.lease("a", 100);
  now = 3_000;
  account.lease("a", 200);
  account.lease("b", 400);
  now = 6_000;
  account.lease("a", 800);
  first.firstToken(); // the oldest left the prefill phase on its own
  now = 13_000;
  assertEquals(account.expire(), 2, "the two leases of t = 3 s");
  assertEquals(account.load("a"), { prefillTokens: 800, prefillRequests: 1, decodeRequests: 2 });
  assertEquals(account.load("b"), { prefillTokens: 0, prefillRequests: 0, decodeRequests: 1 });
  now = 16_000;
  assertEquals(account.expire(), 1);
  assertEquals(account.expiredTotal, 3);
});

Deno.test("an instance forgotten with leases out is dropped at its last release, not kept forever", () => {
  const account = new LoadAccount({ now: () => 0 });
  const idle = account.lease("gone-idle", 10);
  idle.release();
  account.forget("gone-idle");
  const busy = account.lease("gone-busy", 10);
  busy.firstToken();
  account.forget("gone-busy");
  assertEquals(account.trackedInstances, 1, "kept while its request runs");
  assertEquals(account.load("gone-busy").decodeRequests, 1);
  busy.release();
  assertEquals(account.trackedInstances, 0);
  // An id that comes back is tracked again like any other.
  const back = account.lease("gone-busy", 5);
  assertEquals(account.load("gone-busy").prefillTokens, 5);
  back.release();
  assertEquals(account.trackedInstances, 1);
});

import { assert, assertEquals } from "../assert.ts";
import { OTHER_TENANT, TenantLimits } from "../../src/scheduling/tenant_limits.ts";
import { TokenBucket } from "../../src/scheduling/token_bucket.ts";

Deno.test("TokenBucket refills at its rate up to its capacity and says how long a cost must wait", () => {
  const bucket = new TokenBucket(2, 4, 0);
  assert(bucket.take(4, 0));
  assert(!bucket.take(1, 0));
  assertEquals(bucket.waitS(1, 0), 0.5);
  assert(bucket.take(1, 500));
  assertEquals(bucket.level(10_000), 4, "never above capacity");
});

Deno.test("TokenBucket lets a cost above its capacity through once full, leaving it in debt", () => {
  const bucket = new TokenBucket(100, 300, 0);
  assert(bucket.take(1_000, 0));
  assertEquals(bucket.level(0), -700);
  assert(!bucket.take(1, 1_000), "still in debt after 1 s");
  assertEquals(bucket.waitS(1, 1_000), 6.01);
});

Deno.test("TenantLimits maps identities to tenants, everyone else to other, and limits each apart", () => {
  const limits = new TenantLimits(
    [{ name: "search", match: ["k1", "k2"], requestsPerS: 1, burstS: 2 }],
    { requestsPerS: 1, burstS: 1 },
    0,
  );
  assertEquals(limits.tenantOf("k2"), "search");
  assertEquals(limits.tenantOf("unknown"), OTHER_TENANT);
  assertEquals(limits.tenantOf(undefined), OTHER_TENANT);
  assert(limits.charge("search", "requests", 1, 0).admit);
  assert(limits.charge("search", "requests", 1, 0).admit);
  const refused = limits.charge("search", "requests", 1, 0);
  assert(!refused.admit);
  assertEquals(refused.kind, "requests");
  assertEquals(refused.standing, { limit: 2, remaining: 0, resetS: 1 });
  assert(limits.charge(OTHER_TENANT, "requests", 1, 0).admit, "other has its own bucket");
  assert(!limits.charge(OTHER_TENANT, "requests", 1, 0).admit);
  assertEquals(limits.charge("search", "prompt_tokens", 10_000, 0), { admit: true });
});

Deno.test("TenantLimits leaves other unlimited without others rates", () => {
  const limits = new TenantLimits(
    [{ name: "a", match: ["k"], requestsPerS: 1, burstS: 1 }],
    undefined,
    0,
  );
  for (let i = 0; i < 100; i++) {
    assertEquals(limits.charge("other", "requests", 1, 0), { admit: true });
  }
});

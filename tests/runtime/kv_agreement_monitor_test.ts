import { assertEquals, assertMatch } from "../assert.ts";
import type { RequestRecord } from "../../src/contracts.ts";
import { agreementSampleOf, KvAgreementMonitor } from "../../src/runtime/kv_agreement_monitor.ts";

/** A finished request on `instance`: 200 prompt tokens, `local` chunks of 16 predicted there. */
function record(
  instance: string,
  local: number,
  cached: number | undefined,
  overrides: Partial<RequestRecord> = {},
): RequestRecord {
  const tokens = Array.from({ length: 200 }, (_, i) => i);
  return {
    instanceId: instance,
    outcome: "ok",
    usage: { cachedTokens: cached },
    plan: {
      tokens,
      promptTokens: 200,
      keys: ["k"],
      lookup: { outcome: "ok" },
      hits: { poolChunks: local, localChunks: new Map([[instance, local]]) },
    },
    ...overrides,
  } as unknown as RequestRecord;
}

Deno.test("agreementSampleOf() compares the prediction on the serving instance with its reuse", () => {
  assertEquals(agreementSampleOf(record("a", 12, 192), 16), {
    predictedLocalTokens: 192,
    predictedPoolTokens: 192,
    reusedTokens: 192,
  });
});

Deno.test("agreementSampleOf() skips what says nothing: no usage, failure, partial lookup, P/D", () => {
  const skipped = [
    record("a", 12, undefined),
    record("a", 12, 0, { outcome: "midstream_failure" }),
    record("a", 12, 0, { prefillInstanceId: "p0" }),
  ];
  const partial = record("a", 12, 0);
  (partial.plan!.lookup as { outcome: string }).outcome = "deadline";
  skipped.push(partial);
  for (const r of skipped) assertEquals(agreementSampleOf(r, 16), undefined);
});

Deno.test("the monitor logs each change once, with the cause and the command to run", () => {
  const logs: string[] = [];
  const monitor = new KvAgreementMonitor({
    model: "m",
    chunkSize: 16,
    now: () => 0,
    log: (message) => logs.push(message),
    configPath: "/etc/tidegate/router.yaml",
  });
  for (let i = 0; i < 8; i++) monitor.observe(record("a", 0, 192));
  assertEquals(monitor.state("a"), "blind");
  assertEquals(monitor.blindInstances(), ["a"]);
  assertEquals(logs.length, 1);
  assertMatch(logs[0], /^KV agreement of m on a: unknown -> blind: .*seed, chunk size/);
  assertMatch(
    logs[0],
    /npx -y deno@2\.9\.6 task keys --detect --config \/etc\/tidegate\/router\.yaml --model m$/,
  );
  assertEquals(monitor.state("b"), "unknown");
  monitor.forget("a");
  assertEquals(monitor.blindInstances(), []);
});

/**
 * The soak, bounded for the test suite: 24 s of steady traffic at a router process in front of
 * the fakes. Its memory stays within ±35 % of its value after 9 s (a short run is noisier than
 * `deno task soak`'s ±20 % after a minute), fds do not grow, no request fails, no lease remains.
 */
import { assertEquals } from "../assert.ts";
import { runSoak } from "./run_soak.ts";

Deno.test("a bounded soak of a router in front of the fakes: flat memory and fds, 0 failed, 0 leases", async () => {
  const report = await runSoak({
    target: "fakes",
    durationMs: 24_000,
    sampleEveryMs: 3_000,
    warmupMs: 9_000,
    rssTolerance: 0.35,
    fdSlack: 16,
    concurrency: 4,
  });
  assertEquals(report.verdict.problems, [], JSON.stringify(report.samples));
  assertEquals(report.final.leases, 0);
});

import { assert, assertEquals } from "../assert.ts";
import { judgeSoak, type SoakSample } from "./soak_verdict.ts";

const MB = 2 ** 20;
const LIMITS = { warmupMs: 60_000, rssTolerance: 0.2, fdSlack: 16 };
const sample = (atS: number, rssMb: number, extra: Partial<SoakSample> = {}): SoakSample => ({
  atMs: atS * 1000,
  rssBytes: rssMb * MB,
  openFds: 50,
  leases: 0,
  requests: atS * 100,
  failed: 0,
  ...extra,
});

Deno.test("judgeSoak() passes flat memory after the warm-up, whatever the warm-up did", () => {
  const samples = [sample(30, 100), sample(60, 300), sample(90, 340), sample(120, 250)];
  const verdict = judgeSoak(samples, sample(120, 300), LIMITS);
  assertEquals(verdict.problems, []);
  assertEquals(verdict.baseline?.atMs, 60_000);
});

Deno.test("judgeSoak() fails RSS beyond ±20 %, grown fds, leases left and failed requests", () => {
  const samples = [sample(60, 300), sample(90, 370)];
  const verdict = judgeSoak(
    samples,
    sample(120, 300, { openFds: 80, leases: 2, failed: 1 }),
    LIMITS,
  );
  assert(!verdict.ok);
  assertEquals(verdict.problems.length, 4, verdict.problems.join("\n"));
  assert(verdict.problems[0].startsWith("RSS 370 MB at 90 s is 23.3%"), verdict.problems[0]);
});

Deno.test("judgeSoak() fails a run too short to have a baseline", () => {
  assertEquals(judgeSoak([sample(30, 100)], sample(40, 100), LIMITS).ok, false);
});

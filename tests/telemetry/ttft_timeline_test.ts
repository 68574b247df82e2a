import { TtftTimeline } from "../../src/telemetry/ttft_timeline.ts";
import { assert, assertEquals } from "../assert.ts";
import { finishedRecord } from "./records.ts";

const near = (a: number, b: number) => Math.abs(a - b) <= 0.02 * b;

Deno.test("TtftTimeline puts each TTFT in the 10 s bucket of its first token, per model and arm", () => {
  const timeline = new TtftTimeline();
  // Arrival at 9.9 s with a 0.2 s TTFT: the first token came in the 10-20 s bucket.
  timeline.onFinished(finishedRecord({ instance: "a", atMs: 9_900, ttftS: 0.2 }));
  timeline.onFinished(finishedRecord({ instance: "a", atMs: 1_000, ttftS: 0.1 }));
  timeline.onFinished(
    finishedRecord({ instance: "b", atMs: 12_000, ttftS: 0.4, arm: "treatment" }),
  );
  timeline.onFinished(finishedRecord({ instance: "b", atMs: 12_000, ttftS: 0.3, model: "other" }));
  const snapshot = timeline.snapshot(25_000);
  assertEquals(
    snapshot.series.map((s) => [s.model, s.arm, s.points.map((p) => [p.t, p.count])]),
    [
      ["m", "default", [[0, 1], [10_000, 1]]],
      ["m", "treatment", [[10_000, 1]]],
      ["other", "default", [[10_000, 1]]],
    ],
  );
  const first = snapshot.series[0];
  assert(near(first.points[1].p50, 0.2), `${first.points[1].p50}`);
  assertEquals(first.window?.count, 2);
  assert(near(first.window!.p99, 0.2) && near(first.window!.p50, 0.1), "window merges buckets");
  assertEquals([snapshot.from, snapshot.to, snapshot.bucketMs], [
    25_000 - 1_800_000,
    25_000,
    10_000,
  ]);
});

Deno.test("TtftTimeline computes p50, p90 and p99 within one bucket", () => {
  const timeline = new TtftTimeline({ bucketMs: 1_000 });
  for (let i = 1; i <= 100; i++) timeline.add("m", "a", 500, i / 100);
  const [point] = timeline.snapshot(900).series[0].points;
  assertEquals(point.count, 100);
  assert(
    near(point.p50, 0.5) && near(point.p90, 0.9) && near(point.p99, 0.99),
    JSON.stringify(point),
  );
});

Deno.test("TtftTimeline drops buckets and series once they leave the window", () => {
  const timeline = new TtftTimeline({ bucketMs: 1_000, windowMs: 10_000 });
  timeline.add("m", "old", 0, 0.1);
  timeline.add("m", "a", 500, 0.1);
  timeline.add("m", "a", 8_500, 0.2);
  assertEquals(timeline.snapshot(9_000).series.map((s) => [s.arm, s.points.length]), [["a", 2], [
    "old",
    1,
  ]]);
  const later = timeline.snapshot(15_000);
  assertEquals(later.series.map((s) => [s.arm, s.points.map((p) => p.t)]), [["a", [8_000]]]);
  assertEquals(timeline.snapshot(30_000).series, []);
});

Deno.test("TtftTimeline ignores requests without a TTFT or an instance, and caps its series", () => {
  const timeline = new TtftTimeline({ maxSeries: 2 });
  timeline.onFinished(finishedRecord({ instance: "a", atMs: 0 }));
  timeline.onFinished(finishedRecord({ atMs: 0, ttftS: 0.1 }));
  assertEquals(timeline.snapshot(1_000).series, []);
  for (const arm of ["a", "b", "c"]) timeline.add("m", arm, 0, 0.1);
  assertEquals(timeline.snapshot(1_000).series.map((s) => s.arm), ["a", "b"]);
});

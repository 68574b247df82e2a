import {
  formatInteger,
  formatRatio,
  formatSeconds,
  formatTerm,
  niceCeiling,
  ttftChartGeometry,
} from "../../src/dashboard/dashboard_view.js";
import { assert, assertEquals } from "../assert.ts";

Deno.test("the page formats missing numbers as a dash and ratios as percentages", () => {
  assertEquals(formatInteger(null), "–");
  assertEquals(formatInteger(12345.6), "12,346");
  assertEquals(formatRatio(null), "–");
  assertEquals(formatRatio(0.8766), "87.7 %");
  assertEquals(formatSeconds(undefined), "–");
  assertEquals(formatSeconds(0.0042), "4.2 ms");
  assertEquals(formatSeconds(0.25), "250 ms");
  assertEquals(formatSeconds(2.5), "2.50 s");
  assertEquals(formatTerm(2629), "2,629");
  assertEquals(formatTerm(0.123456), "0.123");
  assertEquals(formatTerm(Number.POSITIVE_INFINITY), "Infinity");
});

Deno.test("niceCeiling() rounds an axis maximum up to 1, 2, 2.5 or 5 times a power of ten", () => {
  assertEquals(niceCeiling(0), 1);
  assertEquals(niceCeiling(0.03), 0.05);
  assertEquals(niceCeiling(0.2), 0.2);
  assertEquals(niceCeiling(0.21), 0.25);
  assertEquals(niceCeiling(399), 500);
  assertEquals(niceCeiling(501), 1000);
});

Deno.test("ttftChartGeometry() draws one line per arm and quantile across the data's time span", () => {
  const bucketMs = 10_000;
  const to = 1_000_000;
  const snapshot = { bucketMs, windowMs: 1_800_000, from: to - 1_800_000, to, series: [] };
  const point = (t: number, p50: number) => ({ t, count: 3, p50, p90: p50 * 2, p99: p50 * 3 });
  const series = [
    { model: "m", arm: "a", points: [point(900_000, 0.1), point(990_000, 0.2)] },
    { model: "m", arm: "b", points: [point(950_000, 0.3)] },
  ];
  const size = { width: 500, height: 200, margin: { top: 0, right: 0, bottom: 0, left: 0 } };
  const geometry = ttftChartGeometry(series, snapshot, size)!;
  assertEquals(geometry.lines.map((l) => `${l.arm}/${l.quantile}`), [
    "a/p50",
    "a/p90",
    "a/p99",
    "b/p50",
    "b/p90",
    "b/p99",
  ]);
  assertEquals(geometry.x0, 900_000, "the x axis starts at the oldest point, not the window");
  assertEquals(geometry.x1, to);
  assertEquals(geometry.yMax, 1, "p99 of 0.9 s rounds up to a 1 s axis");
  // Bucket centres: (905 000 − 900 000) / 100 000 of the width; y = 200 − 0.1 × 200. The two
  // points are 9 buckets apart: an idle gap, so two separate subpaths.
  assertEquals(geometry.lines[0].d, "M25 180 M475 160");
  assertEquals(geometry.lines[3].points, [{ x: 275, y: 140 }]);
  assert(geometry.lines[0].color !== geometry.lines[3].color, "each arm has its own colour");
  assertEquals(ttftChartGeometry([], snapshot, size), null);
});

Deno.test("ttftChartGeometry() breaks a line at an idle gap and joins points a bucket or two apart", () => {
  const bucketMs = 10_000;
  const to = 200_000;
  const snapshot = { bucketMs, windowMs: 1_800_000, from: to - 1_800_000, to, series: [] };
  const point = (t: number) => ({ t, count: 1, p50: 0.1, p90: 0.2, p99: 0.4 });
  // Busy 0-30 s (one empty bucket at 20 s), idle 40-110 s, busy again 120-140 s.
  const times = [0, 10_000, 30_000, 120_000, 130_000, 140_000];
  const series = [{ model: "m", arm: "a", points: times.map(point) }];
  const size = { width: 200, height: 100, margin: { top: 0, right: 0, bottom: 0, left: 0 } };
  const geometry = ttftChartGeometry(series, snapshot, size)!;
  assertEquals(geometry.x0, 0);
  assertEquals(geometry.x1, to);
  for (const line of geometry.lines) {
    assertEquals(line.segments.map((run) => run.length), [3, 3], `${line.quantile}`);
    assertEquals(line.segments.flat(), line.points, "every point is in exactly one segment");
    // One "M" per segment: nothing is drawn from the last busy point before the gap to the
    // first after it.
    assertEquals(line.d.split("M").length - 1, 2);
  }
  const p50 = geometry.lines[0];
  // x = (t + 5 000) / 200 000 × 200; y = 100 − 0.1 / 0.5 × 100.
  assertEquals(p50.d, "M5 80 L15 80 L35 80 M125 80 L135 80 L145 80");
  const lastBeforeGap = p50.segments[0].at(-1)!;
  const firstAfterGap = p50.segments[1][0];
  assert(
    !p50.d.includes(`L${firstAfterGap.x} ${firstAfterGap.y}`),
    `no segment from ${lastBeforeGap.x} to ${firstAfterGap.x}`,
  );

  // Without gaps the line is one segment.
  const steady = [{ model: "m", arm: "a", points: [0, 10_000, 20_000].map(point) }];
  assertEquals(ttftChartGeometry(steady, snapshot, size)!.lines[0].segments.length, 1);
});

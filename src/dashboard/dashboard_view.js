// @ts-check
/**
 * The dashboard page's pure helpers (served as /dashboard/dashboard_view.js, imported by the
 * page script): number formatting and chart geometry. No DOM here, so Deno tests import it.
 */

export const ARM_COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"];
/** @type {[string, string][]} quantile → stroke-dasharray */
const QUANTILE_STYLES = [["p50", ""], ["p90", "6 3"], ["p99", "2 3"]];

// ---------------------------------------------------------------- formatting (pure)

/** @param {number | null | undefined} value */
export function formatInteger(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  return Math.round(value).toLocaleString("en-US");
}

/** @param {number | null | undefined} value a ratio in [0, 1] */
export function formatRatio(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  return `${(value * 100).toFixed(1)} %`;
}

/** @param {number | null | undefined} seconds */
export function formatSeconds(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  if (seconds === 0) return "0";
  if (seconds < 0.01) return `${(seconds * 1000).toFixed(1)} ms`;
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  return `${seconds.toFixed(2)} s`;
}

/**
 * A score term: integers for large values, three significant digits otherwise.
 * @param {number | null | undefined} value
 */
export function formatTerm(value) {
  if (value === null || value === undefined) return "–";
  if (!Number.isFinite(value)) return String(value);
  if (Math.abs(value) >= 1000 || Number.isInteger(value)) return formatInteger(value);
  return String(Number(value.toPrecision(3)));
}

/** @param {number} ms wall-clock milliseconds */
export function formatClock(ms) {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0"))
    .join(":");
}

/**
 * The smallest of 1, 2, 2.5, 5 × 10^k at or above `value` (axis maxima).
 * @param {number} value
 */
export function niceCeiling(value) {
  if (!(value > 0) || !Number.isFinite(value)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (m * power >= value * (1 - 1e-12)) return m * power;
  }
  return 10 * power;
}

// ---------------------------------------------------------------- chart geometry (pure)

/**
 * @typedef {{ t: number, count: number, p50: number, p90: number, p99: number }} TtftPoint
 * @typedef {{ model: string, arm: string, points: TtftPoint[],
 *   window?: { count: number, p50: number, p90: number, p99: number } }} TtftSeries
 * @typedef {{ bucketMs: number, windowMs: number, from: number, to: number,
 *   series: TtftSeries[] }} TtftSnapshot
 * @typedef {{ width: number, height: number,
 *   margin: { top: number, right: number, bottom: number, left: number } }} ChartSize
 */

/**
 * Points further apart than this many buckets are not joined: an idle stretch (no request with a
 * first token in two or more buckets in a row) shows as a break in the line, not a slope.
 */
export const GAP_BUCKETS = 2;

/**
 * Lines for p50/p90/p99 of every series, x = time (bucket centres), y = seconds from 0. The x
 * range spans the data (at least six buckets) up to the snapshot's end, not the whole window, so
 * a young router's few minutes fill the chart. A line breaks where its points are more than
 * GAP_BUCKETS buckets apart: `segments` holds the runs, `d` one subpath ("M ...") per run.
 * @param {TtftSeries[]} series
 * @param {TtftSnapshot} snapshot
 * @param {ChartSize} size
 */
export function ttftChartGeometry(series, snapshot, size) {
  const points = series.flatMap((s) => s.points);
  if (points.length === 0) return null;
  const { width, height, margin } = size;
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const bucket = snapshot.bucketMs;
  const x1 = Math.max(snapshot.to, ...points.map((p) => p.t + bucket));
  const x0 = Math.max(
    snapshot.from,
    Math.min(x1 - 6 * bucket, ...points.map((p) => p.t)),
  );
  const yMax = niceCeiling(Math.max(...points.map((p) => p.p99)));
  /** @param {number} t */
  const x = (t) => margin.left + Math.min(1, Math.max(0, (t - x0) / (x1 - x0))) * plotW;
  /** @param {number} v */
  const y = (v) => margin.top + plotH - Math.min(1, Math.max(0, v / yMax)) * plotH;
  const round = (/** @type {number} */ v) => Math.round(v * 10) / 10;
  const lines = series.flatMap((s, index) =>
    QUANTILE_STYLES.map(([quantile, dash]) => {
      const xy = s.points.map((p) => ({
        x: round(x(p.t + bucket / 2)),
        y: round(y(/** @type {number} */ (p[/** @type {"p50"} */ (quantile)]))),
      }));
      /** @type {{ x: number, y: number }[][]} */
      const segments = [];
      s.points.forEach((p, i) => {
        if (i === 0 || p.t - s.points[i - 1].t > GAP_BUCKETS * bucket) segments.push([]);
        segments[segments.length - 1].push(xy[i]);
      });
      return {
        model: s.model,
        arm: s.arm,
        quantile,
        dash,
        color: ARM_COLORS[index % ARM_COLORS.length],
        d: segments.map((run) => run.map((p, i) => `${i ? "L" : "M"}${p.x} ${p.y}`).join(" "))
          .join(" "),
        segments,
        points: xy,
      };
    })
  );
  const xTicks = [0, 0.25, 0.5, 0.75, 1].map((f) => ({
    x: round(margin.left + f * plotW),
    label: formatClock(x0 + f * (x1 - x0)),
  }));
  const yTicks = [0, 0.25, 0.5, 0.75, 1].map((f) => ({
    y: round(margin.top + plotH - f * plotH),
    label: formatSeconds(f * yMax),
  }));
  return { x0, x1, yMax, lines, xTicks, yTicks };
}

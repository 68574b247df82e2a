/**
 * TTFT percentiles per model and arm over time, for the dashboard: fixed wall-clock buckets
 * (default 10 s) kept for a window (default 30 min), each a quantile sketch. A request counts in
 * the bucket of its first token (arrival + TTFT). Pure: time comes from the records and callers.
 */
import type { RequestObserver, RequestRecord } from "../contracts.ts";
import { QuantileSketch } from "./quantile_sketch.ts";

export interface TtftTimelineOptions {
  bucketMs?: number;
  windowMs?: number;
  /** Relative error of the percentiles (default 0.02). */
  relativeError?: number;
  /** Most (model, arm) series kept; new ones beyond it are ignored (default 64). */
  maxSeries?: number;
}

export interface TtftPercentiles {
  count: number;
  p50: number;
  p90: number;
  p99: number;
}

export interface TtftPoint extends TtftPercentiles {
  /** Bucket start, wall-clock ms. */
  t: number;
}

export interface TtftSeries {
  model: string;
  arm: string;
  /** Buckets with at least one request, oldest first. */
  points: TtftPoint[];
  /** Over the whole window; undefined when the window is empty. */
  window?: TtftPercentiles;
}

export interface TtftTimelineSnapshot {
  bucketMs: number;
  windowMs: number;
  /** Window start and end (wall-clock ms), for the chart's x axis. */
  from: number;
  to: number;
  series: TtftSeries[];
}

export class TtftTimeline implements RequestObserver {
  readonly bucketMs: number;
  readonly windowMs: number;
  readonly #relativeError: number;
  readonly #maxSeries: number;
  /** `model\0arm` → bucket start → sketch. */
  readonly #series = new Map<
    string,
    { model: string; arm: string; buckets: Map<number, QuantileSketch> }
  >();

  constructor(options: TtftTimelineOptions = {}) {
    this.bucketMs = Math.max(1, options.bucketMs ?? 10_000);
    this.windowMs = Math.max(this.bucketMs, options.windowMs ?? 30 * 60_000);
    this.#relativeError = options.relativeError ?? 0.02;
    this.#maxSeries = Math.max(1, options.maxSeries ?? 64);
  }

  onFinished(record: RequestRecord): void {
    if (record.ttftS === undefined || !record.instanceId) return;
    this.add(
      record.model || "unknown",
      record.arm || "none",
      record.startedAtWallMs + record.ttftS * 1000,
      record.ttftS,
    );
  }

  /** Records one TTFT (seconds) whose first token came at `atMs` (wall clock). */
  add(model: string, arm: string, atMs: number, ttftS: number): void {
    if (!Number.isFinite(atMs) || !Number.isFinite(ttftS)) return;
    const key = `${model}\0${arm}`;
    let series = this.#series.get(key);
    if (!series) {
      if (this.#series.size >= this.#maxSeries) return;
      series = { model, arm, buckets: new Map() };
      this.#series.set(key, series);
    }
    const start = Math.floor(atMs / this.bucketMs) * this.bucketMs;
    let sketch = series.buckets.get(start);
    if (!sketch) {
      sketch = new QuantileSketch(this.#relativeError);
      series.buckets.set(start, sketch);
      this.#prune(atMs);
    }
    sketch.add(ttftS);
  }

  /** Percentiles per bucket within the window ending at `nowMs`; drops older buckets. */
  snapshot(nowMs: number): TtftTimelineSnapshot {
    this.#prune(nowMs);
    const from = nowMs - this.windowMs;
    const series: TtftSeries[] = [];
    for (const { model, arm, buckets } of this.#series.values()) {
      const starts = [...buckets.keys()].filter((t) => t <= nowMs).sort((a, b) => a - b);
      const whole = new QuantileSketch(this.#relativeError);
      const points = starts.map((t) => {
        const sketch = buckets.get(t)!;
        whole.merge(sketch);
        return { t, ...percentiles(sketch)! };
      });
      series.push({ model, arm, points, window: percentiles(whole) });
    }
    series.sort((a, b) => a.model.localeCompare(b.model) || a.arm.localeCompare(b.arm));
    return { bucketMs: this.bucketMs, windowMs: this.windowMs, from, to: nowMs, series };
  }

  #prune(nowMs: number): void {
    // A bucket is dropped once it lies wholly before the window.
    const oldest = nowMs - this.windowMs - this.bucketMs;
    for (const [key, series] of this.#series) {
      for (const start of series.buckets.keys()) {
        if (start <= oldest) series.buckets.delete(start);
      }
      if (series.buckets.size === 0) this.#series.delete(key);
    }
  }
}

function percentiles(sketch: QuantileSketch): TtftPercentiles | undefined {
  if (sketch.count === 0) return undefined;
  return {
    count: sketch.count,
    p50: sketch.quantile(0.5)!,
    p90: sketch.quantile(0.9)!,
    p99: sketch.quantile(0.99)!,
  };
}

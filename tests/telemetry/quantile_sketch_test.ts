import { QuantileSketch } from "../../src/telemetry/quantile_sketch.ts";
import { assert, assertEquals, assertThrows } from "../assert.ts";

/** 1..n milliseconds (as seconds) in a scrambled order. */
function scrambled(n: number): number[] {
  return Array.from({ length: n }, (_, i) => ((i * 7919) % n + 1) / 1000);
}

Deno.test("QuantileSketch answers nearest-rank percentiles within its relative error", () => {
  const sketch = new QuantileSketch(0.02);
  for (const v of scrambled(1000)) sketch.add(v);
  assertEquals(sketch.count, 1000);
  for (const [q, exact] of [[0.5, 0.5], [0.9, 0.9], [0.99, 0.99], [0.001, 0.001], [1, 1]]) {
    const estimate = sketch.quantile(q)!;
    assert(
      Math.abs(estimate - exact) <= 0.02 * exact * (1 + 1e-9),
      `q${q}: ${estimate} is within 2 % of ${exact}`,
    );
  }
});

Deno.test("QuantileSketch never reports beyond the exact minimum and maximum seen", () => {
  const sketch = new QuantileSketch(0.05);
  for (const v of [0.1003, 0.1003, 0.1003]) sketch.add(v);
  assertEquals(sketch.quantile(0), 0.1003);
  assertEquals(sketch.quantile(0.5), 0.1003);
  assertEquals(sketch.quantile(1), 0.1003);
});

Deno.test("QuantileSketch.merge() gives the same percentiles as adding every value to one sketch", () => {
  const all = new QuantileSketch();
  const left = new QuantileSketch();
  const right = new QuantileSketch();
  scrambled(500).forEach((v, i) => {
    all.add(v);
    (i % 3 ? left : right).add(v);
  });
  left.merge(right);
  assertEquals(left.count, all.count);
  for (const q of [0.1, 0.5, 0.9, 0.99]) assertEquals(left.quantile(q), all.quantile(q));
  assertThrows(() => left.merge(new QuantileSketch(0.1)), RangeError);
});

Deno.test("QuantileSketch counts zero, ignores negative and non-finite values, and is empty at first", () => {
  const sketch = new QuantileSketch();
  assertEquals(sketch.quantile(0.5), undefined);
  for (const v of [0, 0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2]) sketch.add(v);
  assertEquals(sketch.count, 3);
  assertEquals(sketch.quantile(0.5), 0);
  assert(Math.abs(sketch.quantile(0.99)! - 2) < 0.04);
});

Deno.test("QuantileSketch answers afresh when values or a merge fill a new bin between queries", () => {
  const sketch = new QuantileSketch();
  for (const v of [1, 3]) sketch.add(v);
  assert(Math.abs(sketch.quantile(0.5)! - 1) <= 0.02, "median of 1 and 3");
  for (const v of [2, 2, 2]) sketch.add(v);
  assert(Math.abs(sketch.quantile(0.5)! - 2) <= 0.04, `added: ${sketch.quantile(0.5)}`);
  const other = new QuantileSketch();
  for (let i = 0; i < 10; i++) other.add(1.5);
  sketch.merge(other);
  assert(Math.abs(sketch.quantile(0.5)! - 1.5) <= 0.03, `merged: ${sketch.quantile(0.5)}`);
});

import { ok, strictEqual } from "node:assert/strict";
import { StoreHealth } from "../../src/kv/store_health.ts";

Deno.test("StoreHealth sends every lookup while the store is up", () => {
  const health = new StoreHealth();
  strictEqual(health.admit(0), "send");
  health.recordSuccess(1);
  strictEqual(health.admit(2), "send");
  strictEqual(health.state, "up");
  strictEqual(health.downUntil, undefined);
});

Deno.test("StoreHealth skips lookups for the down-window after one lookup fails entirely", () => {
  const health = new StoreHealth({ downWindowMs: 30_000 });
  health.admit(0);
  health.recordFailure(10, "refused");
  strictEqual(health.state, "down");
  strictEqual(health.downUntil, 30_010);
  strictEqual(health.admit(11), "skip");
  strictEqual(health.admit(30_009), "skip");
  const snapshot = health.snapshot();
  strictEqual(snapshot.skipped, 2);
  strictEqual(snapshot.markedDown, 1);
  strictEqual(snapshot.lastError, "refused");
  strictEqual(snapshot.consecutiveFailures, 1);
});

Deno.test("StoreHealth hands out a single probe after the window and reopens on its success", () => {
  const health = new StoreHealth({ downWindowMs: 1_000 });
  health.recordFailure(0, "503");
  strictEqual(health.admit(1_000), "probe");
  strictEqual(health.state, "probing");
  strictEqual(health.admit(1_001), "skip");
  health.recordSuccess(1_020, true);
  strictEqual(health.state, "up");
  strictEqual(health.admit(1_021), "send");
  const snapshot = health.snapshot();
  strictEqual(snapshot.probes, 1);
  strictEqual(snapshot.recovered, 1);
  strictEqual(snapshot.consecutiveFailures, 0);
});

Deno.test("StoreHealth starts a new full window when the probe fails or misses its deadline", () => {
  const health = new StoreHealth({ downWindowMs: 1_000 });
  health.recordFailure(0, "refused");
  strictEqual(health.admit(1_000), "probe");
  health.recordFailure(1_005, "refused again", true);
  strictEqual(health.state, "down");
  strictEqual(health.downUntil, 2_005);
  strictEqual(health.admit(2_004), "skip");
  strictEqual(health.admit(2_005), "probe");
  health.recordDeadline(2_055, true);
  strictEqual(health.state, "down");
  strictEqual(health.downUntil, 3_055);
  strictEqual(health.snapshot().markedDown, 3);
});

Deno.test("StoreHealth opens the window after N consecutive deadlines, not after fewer", () => {
  const health = new StoreHealth({ deadlinesToOpen: 3, downWindowMs: 500 });
  health.recordDeadline(1);
  health.recordDeadline(2);
  strictEqual(health.state, "up");
  strictEqual(health.consecutiveDeadlines, 2);
  health.recordSuccess(3);
  strictEqual(health.consecutiveDeadlines, 0);
  health.recordDeadline(4);
  health.recordDeadline(5);
  strictEqual(health.state, "up");
  health.recordDeadline(6);
  strictEqual(health.state, "down");
  strictEqual(health.downUntil, 506);
  strictEqual(health.lastError, "lookup deadline exceeded");
  strictEqual(health.snapshot().deadlines, 5);
});

Deno.test("StoreHealth ignores late reports of lookups sent before the window opened", () => {
  const health = new StoreHealth({ downWindowMs: 1_000 });
  health.recordFailure(0, "refused");
  health.recordSuccess(5);
  strictEqual(health.state, "down", "a late success does not close the window");
  health.recordFailure(6, "late failure");
  strictEqual(health.downUntil, 1_000, "a late failure does not extend it");
  strictEqual(health.admit(1_000), "probe");
  health.recordSuccess(1_001);
  strictEqual(health.state, "probing", "only the probe's own report decides");
  health.recordFailure(1_002, "late", false);
  strictEqual(health.state, "probing");
});

Deno.test("StoreHealth lets the next lookup probe at once when the probe is abandoned by its caller", () => {
  const health = new StoreHealth({ downWindowMs: 1_000 });
  health.recordFailure(0, "x");
  strictEqual(health.admit(1_000), "probe");
  health.recordAbandoned(1_010, true);
  strictEqual(health.state, "down");
  strictEqual(health.admit(1_011), "probe");
});

Deno.test("StoreHealth allows another probe when a probe never reports back", () => {
  const health = new StoreHealth({ downWindowMs: 100, probeStaleMs: 5_000 });
  health.recordFailure(0, "x");
  strictEqual(health.admit(100), "probe");
  strictEqual(health.admit(5_099), "skip");
  strictEqual(health.admit(5_100), "probe");
  strictEqual(health.snapshot().probes, 2);
});

Deno.test("StoreHealth honours failuresToOpen above one", () => {
  const health = new StoreHealth({ failuresToOpen: 2 });
  health.recordFailure(0, "a");
  strictEqual(health.state, "up");
  health.recordFailure(1, "b");
  strictEqual(health.state, "down");
  ok(health.snapshot().failures === 2);
});

Deno.test("StoreHealth.endWindow lets the next lookup probe at once, and does nothing while up", () => {
  const health = new StoreHealth({ downWindowMs: 30_000 });
  health.endWindow(0);
  strictEqual(health.admit(0), "send");
  health.recordFailure(0, "503");
  strictEqual(health.admit(1), "skip");
  health.endWindow(2);
  strictEqual(health.admit(2), "probe");
});

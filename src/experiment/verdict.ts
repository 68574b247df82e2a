import { type ArmComparison, type ArmReport, SIGNIFICANCE } from "./arm_stats.ts";

/** Below this many TTFTs in either arm the verdict says "not enough data" instead of a p-value. */
export const MIN_SAMPLES = 30;

/**
 * One plain-language line per non-control arm, headed by p90 (the tail users feel), e.g. "arm B
 * is 23% faster than A at p90 (1.20 s vs 1.56 s), p=0.003, n=4,210 vs 4,190; geometric mean 18%
 * faster (p<0.001)". Each claim carries its own session-clustered p-value; a p90 difference
 * with p ≥ 0.05 is called "not significant" in so many words.
 */
export function verdictLine(comparison: ArmComparison, arm: ArmReport, control: ArmReport): string {
  const { n } = comparison;
  const counts = `n=${count(n.arm)} vs ${count(n.control)}`;
  const name = `arm ${comparison.arm}`;
  const versus = comparison.control;
  const p90 = comparison.p90Test;
  if (n.arm < MIN_SAMPLES || n.control < MIN_SAMPLES || p90 === null) {
    return `${name} vs ${versus}: not enough data yet (${counts}; at least ${MIN_SAMPLES} ` +
      `TTFTs per arm are needed)${outcomes(arm, control)}`;
  }
  const geometric = comparison.geometricMean;
  const mean = geometric === null
    ? ""
    : `; geometric mean ${relative(geometric.ratio - 1)} (${pValue(geometric.p)}${
      geometric.p < SIGNIFICANCE ? ", significant" : ""
    })`;
  if (!comparison.significant) {
    return `${name} vs ${versus}: not significant at p90 (${relative(p90.ratio - 1)}, ` +
      `${pValue(p90.p)}, ${counts})${mean}${outcomes(arm, control)}`;
  }
  return `${name} is ${relative(p90.ratio - 1)} than ${versus} at ` +
    `p90 (${seconds(arm.ttft.p90)} vs ${seconds(control.ttft.p90)}), ${pValue(p90.p)}, ` +
    `${counts}${mean}${outcomes(arm, control)}`;
}

/** Verdict lines for every arm against the control; empty with fewer than two arms. */
export function verdictLines(
  arms: readonly ArmReport[],
  comparisons: readonly ArmComparison[],
): string[] {
  const byName = new Map(arms.map((a) => [a.name, a]));
  return comparisons.map((c) => verdictLine(c, byName.get(c.arm)!, byName.get(c.control)!));
}

/** "p=0.003", "p<0.001", "p=0.41". */
export function pValue(p: number): string {
  if (!Number.isFinite(p)) return "p=n/a";
  if (p < 0.001) return "p<0.001";
  return `p=${p < 0.1 ? p.toFixed(3) : p.toFixed(2)}`;
}

/** "23% faster", "4% slower", "2.7× slower", "about the same". */
function relative(change: number): string {
  if (Math.abs(change) < 0.005) return "about the same";
  if (change >= 1) return `${(1 + change).toFixed(1)}× slower`;
  return `${Math.round(Math.abs(change) * 100)}% ${change < 0 ? "faster" : "slower"}`;
}

function count(n: number): string {
  return n.toLocaleString("en-US");
}

function seconds(value: number | null): string {
  if (value === null) return "n/a";
  if (value >= 10) return `${value.toFixed(1)} s`;
  if (value >= 1) return `${value.toFixed(2)} s`;
  return `${Math.round(value * 1000)} ms`;
}

/** "; 429s 12 vs 3; errors 2 vs 0" when either arm had any. */
function outcomes(arm: ArmReport, control: ArmReport): string {
  let out = "";
  if (arm.rejected + control.rejected > 0) out += `; 429s ${arm.rejected} vs ${control.rejected}`;
  if (arm.errors + control.errors > 0) out += `; errors ${arm.errors} vs ${control.errors}`;
  return out;
}

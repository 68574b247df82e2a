import {
  type ArmComparison,
  type ArmObservation,
  type ArmReport,
  armReport,
  ArmTally,
  compareArms,
} from "./arm_stats.ts";
import { verdictLines } from "./verdict.ts";

/** An arm as the report names it. */
export interface ArmDescription {
  name: string;
  /** The policy's name (parameters are in the experiment config). */
  policy: string;
  weight: number;
}

export interface ExperimentReport {
  /** The first arm: every other arm is compared with it. */
  control: string;
  arms: ArmReport[];
  comparisons: ArmComparison[];
  /** One plain-language line per non-control arm. */
  verdict: string[];
}

/** The observations of one experiment (one model, one version of its arms). */
export class ExperimentTally {
  readonly arms: readonly ArmDescription[];
  readonly #tallies = new Map<string, ArmTally>();
  /** Observations whose arm is not (or no longer) part of the experiment. */
  unknownArm = 0;

  constructor(arms: readonly ArmDescription[]) {
    this.arms = arms;
    for (const arm of arms) this.#tallies.set(arm.name, new ArmTally());
  }

  record(observation: ArmObservation): void {
    const tally = this.#tallies.get(observation.arm);
    if (tally) tally.record(observation);
    else this.unknownArm++;
  }

  tally(arm: string): ArmTally | undefined {
    return this.#tallies.get(arm);
  }

  report(): ExperimentReport {
    const rows = this.arms.map((arm) => ({
      report: armReport(arm, this.#tallies.get(arm.name)!),
      tally: this.#tallies.get(arm.name)!,
    }));
    const [control, ...others] = rows;
    const comparisons = control ? others.map((row) => compareArms(row, control)) : [];
    const arms = rows.map((r) => r.report);
    return {
      control: control?.report.name ?? "",
      arms,
      comparisons,
      verdict: verdictLines(arms, comparisons),
    };
  }
}

/** The report as aligned plain text (the simulator's console output). */
export function experimentReportText(report: ExperimentReport, title = "Experiment"): string {
  const lines = [title, ""];
  const header = [
    "arm",
    "policy",
    "weight",
    "requests",
    "ttft n",
    "mean (95% CI)",
    "p50 (95% CI)",
    "p90 (95% CI)",
    "p99 (95% CI)",
    "hit ratio",
    "429s",
    "errors",
  ];
  const rows = report.arms.map((arm) => [
    arm.name,
    arm.policy,
    String(arm.weight),
    String(arm.requests),
    String(arm.ttft.n),
    withCi(arm.ttft.mean, arm.ttft.meanCi),
    withCi(arm.ttft.p50, arm.ttft.p50Ci),
    withCi(arm.ttft.p90, arm.ttft.p90Ci),
    withCi(arm.ttft.p99, arm.ttft.p99Ci),
    arm.hitRatio === null ? "n/a" : arm.hitRatio.toFixed(3),
    String(arm.rejected),
    String(arm.errors),
  ]);
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)));
  const format = (cells: string[]) =>
    cells.map((cell, c) => (c < 2 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join(
      "  ",
    );
  lines.push(format(header));
  for (const row of rows) lines.push(format(row));
  lines.push("");
  for (const c of report.comparisons) {
    const welch = c.welchLogTtft;
    lines.push(
      `${c.arm} vs ${c.control}, session-clustered: p90 ratio ${round(c.p90Test?.ratio ?? null)} ` +
        `p=${sci(c.p90Test?.p ?? null)}, geometric-mean ratio ${
          round(c.geometricMean?.ratio ?? null)
        } p=${sci(c.geometricMean?.p ?? null)}`,
      `${" ".repeat(c.arm.length + c.control.length + 4)}per request: Mann-Whitney U=${
        round(c.mannWhitney.u)
      } p=${sci(c.mannWhitney.p)}, Welch on log-TTFT t=${round(welch.t)} p=${sci(welch.p)}`,
    );
  }
  if (report.comparisons.length) lines.push("");
  lines.push("Verdict:");
  for (const line of report.verdict) lines.push(`  ${line}`);
  return lines.join("\n") + "\n";
}

function withCi(value: number | null, ci: [number | null, number | null]): string {
  if (value === null) return "n/a";
  const bound = (b: number | null) => (b === null ? "?" : b.toFixed(2));
  return `${value.toFixed(2)} (${bound(ci[0])}-${bound(ci[1])})`;
}

function round(value: number | null): string {
  return value === null || !Number.isFinite(value) ? "n/a" : String(Number(value.toFixed(3)));
}

function sci(value: number | null): string {
  if (value === null || !Number.isFinite(value)) return "n/a";
  return value < 1e-4 ? value.toExponential(1) : value.toFixed(4);
}

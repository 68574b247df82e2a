import type { PdSummary } from "./pd_summary.ts";

/** The P/D mode's Markdown: TTFT, rejections and load, TBT; with the command and settings. */
export function pdResultsMarkdown(
  summaries: Record<string, PdSummary>,
  context: { command: string; settings: Record<string, string | number | boolean>; title?: string },
): string {
  const runs = Object.entries(summaries);
  const lines = [
    `# ${context.title ?? "Simulator results: prefill/decode disaggregation"}`,
    "",
    "Command:",
    "",
    "```sh",
    context.command,
    "```",
    "",
    "## TTFT",
    "",
    "| run | mean TTFT (s) | P50 (s) | P90 (s) | P99 (s) | TTFT SLO attainment | rejected | hit ratio | prefill tokens (M) | transferred (M) |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const [name, s] of runs) {
    lines.push(
      `| ${name} | ${f(s.meanTtftS, 2)} | ${f(s.p50TtftS, 2)} | ${f(s.p90TtftS, 2)} | ${
        f(s.p99TtftS, 2)
      } | ${pct(s.sloAttainment)} | ${s.rejected} | ${f(s.hitRatio, 3)} | ${
        f(s.prefillTokens / 1e6, 1)
      } | ${f(s.transferTokens / 1e6, 1)} |`,
    );
  }
  lines.push(
    "",
    "## Rejections and pool load",
    "",
    "Load: the pools' load sampled over the run (1 = at the SLO), its mean and coefficient of " +
      "variation; correlation of the two series (negative: anti-phase).",
    "",
    "| run | rejected | before prefill | after prefill | wasted prefill tokens (M) | prefill load mean (CV) | decode load mean (CV) | correlation |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  );
  for (const [name, s] of runs) {
    lines.push(
      `| ${name} | ${s.rejected} | ${s.rejectedBeforePrefill} | ${s.rejectedAfterPrefill} | ${
        f(s.wastedPrefillTokens / 1e6, 1)
      } | ${f(s.load.prefillMean, 2)} (${f(s.load.prefillCv, 2)}) | ${f(s.load.decodeMean, 2)} (${
        f(s.load.decodeCv, 2)
      }) | ${f(s.load.correlation, 2)} |`,
    );
  }
  lines.push(
    "",
    "## Time between tokens",
    "",
    "| run | TBT P50 (s) | P90 (s) | P99 (s) | gaps within the TBT SLO | requests with TPOT within it | mean TPOT (s) |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  );
  for (const [name, s] of runs) {
    lines.push(
      `| ${name} | ${f(s.tbtP50S, 3)} | ${f(s.tbtP90S, 3)} | ${f(s.tbtP99S, 3)} | ${
        pct(s.tbtSloTokenShare)
      } | ${pct(s.tbtSloRequestShare)} | ${f(s.meanTpotS ?? NaN, 3)} |`,
    );
  }
  lines.push("", "Settings:", "");
  for (const [key, value] of Object.entries(context.settings)) lines.push(`- ${key}: ${value}`);
  lines.push("");
  return lines.join("\n");
}

function f(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : "n/a";
}

function pct(share: number): string {
  return Number.isFinite(share) ? `${(share * 100).toFixed(1)}%` : "n/a";
}

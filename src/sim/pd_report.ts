import type { PdSummary } from "./pd_summary.ts";
import { resultsHeader } from "./results_markdown.ts";
import { fixed, percent } from "./number_format.ts";

type Runs = [name: string, summary: PdSummary][];

/** The P/D mode's Markdown: TTFT, rejections and load, TBT; with the command and settings. */
export function pdResultsMarkdown(
  summaries: Record<string, PdSummary>,
  context: { command: string; settings: Record<string, string | number | boolean>; title?: string },
): string {
  const runs = Object.entries(summaries);
  return [
    ...resultsHeader(
      context.title ?? "Simulator results: prefill/decode disaggregation",
      context.command,
    ),
    ...ttftSection(runs),
    "",
    ...rejectionSection(runs),
    "",
    ...tbtSection(runs),
    "",
    ...localPrefillSection(runs),
    "Settings:",
    "",
    ...Object.entries(context.settings).map(([key, value]) => `- ${key}: ${value}`),
    "",
  ].join("\n");
}

/** TTFT per run: mean and percentiles, SLO attainment, rejections, cache hits, tokens. */
function ttftSection(runs: Runs): string[] {
  return [
    "## TTFT",
    "",
    "| run | mean TTFT (s) | P50 (s) | P90 (s) | P99 (s) | TTFT SLO attainment | rejected | hit ratio | prefill tokens (M) | transferred (M) |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...runs.map(([name, s]) =>
      `| ${name} | ${fixed(s.meanTtftS, 2)} | ${fixed(s.p50TtftS, 2)} | ${fixed(s.p90TtftS, 2)} | ${
        fixed(s.p99TtftS, 2)
      } | ${percent(s.sloAttainment)} | ${s.rejected} | ${fixed(s.hitRatio, 3)} | ${
        fixed(s.prefillTokens / 1e6, 1)
      } | ${fixed(s.transferTokens / 1e6, 1)} |`
    ),
  ];
}

/** Rejections before and after the prefill, and the two pools' load over the run. */
function rejectionSection(runs: Runs): string[] {
  return [
    "## Rejections and pool load",
    "",
    "Load: the pools' load sampled over the run (1 = at the SLO), its mean and coefficient of " +
    "variation; correlation of the two series (negative: anti-phase).",
    "",
    "| run | rejected | before prefill | after prefill | wasted prefill tokens (M) | prefill load mean (CV) | decode load mean (CV) | correlation |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...runs.map(([name, s]) =>
      `| ${name} | ${s.rejected} | ${s.rejectedBeforePrefill} | ${s.rejectedAfterPrefill} | ${
        fixed(s.wastedPrefillTokens / 1e6, 1)
      } | ${fixed(s.load.prefillMean, 2)} (${fixed(s.load.prefillCv, 2)}) | ${
        fixed(s.load.decodeMean, 2)
      } (${fixed(s.load.decodeCv, 2)}) | ${fixed(s.load.correlation, 2)} |`
    ),
  ];
}

/** Time between tokens: the gaps' percentiles and how many gaps and requests meet the SLO. */
function tbtSection(runs: Runs): string[] {
  return [
    "## Time between tokens",
    "",
    "| run | TBT P50 (s) | P90 (s) | P99 (s) | gaps within the TBT SLO | requests with TPOT within it | mean TPOT (s) | served within both SLOs |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...runs.map(([name, s]) =>
      `| ${name} | ${fixed(s.tbtP50S, 3)} | ${fixed(s.tbtP90S, 3)} | ${fixed(s.tbtP99S, 3)} | ${
        percent(s.tbtSloTokenShare)
      } | ${percent(s.tbtSloRequestShare)} | ${
        fixed(s.meanTpotS ?? NaN, 3)
      } | ${s.withinBothSlos} |`
    ),
  ];
}

/** Conditional disaggregation's runs (`--local-prefill`): served well, goodput, local, wasted. */
function localPrefillSection(runs: Runs): string[] {
  const local = runs.filter(([, s]) => s.localPrefill !== undefined);
  if (local.length === 0) return [];
  return [
    "## Conditional disaggregation",
    "",
    "Wasted prefill tokens: computed for requests refused after their prefill, plus those a " +
    "prefill instance computed that the request's decode instance already held at arrival.",
    "",
    "| run | mean TTFT (s) | P99 (s) | TTFT SLO | TPOT within TBT SLO | within both SLOs | goodput (req/s) | rejected | local prefills | wasted prefill tokens (M) | of which redundant (M) |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...local.map(([name, s]) => {
      const l = s.localPrefill!;
      return `| ${name} | ${fixed(s.meanTtftS, 2)} | ${fixed(s.p99TtftS, 2)} | ${
        percent(s.sloAttainment)
      } | ${percent(s.tbtSloRequestShare)} | ${s.withinBothSlos} | ${
        fixed(l.goodputRps, 2)
      } | ${s.rejected} | ${l.localPrefills} | ${fixed(l.wastedTotalTokens / 1e6, 2)} | ${
        fixed(l.redundantPrefillTokens / 1e6, 2)
      } |`;
    }),
    "",
  ];
}

import type { PrefillModelCoefficients } from "../scheduling/types.ts";
import type { PolicySummary } from "./summary.ts";
import { fixed } from "./number_format.ts";

/** A results page's title and the command that produced it (both simulator modes). */
export function resultsHeader(title: string, command: string): string[] {
  return [`# ${title}`, "", "Command:", "", "```sh", command, "```", ""];
}

/** The Markdown results table, with the settings and the command that produced it. */
export function resultsMarkdown(
  summaries: Record<string, PolicySummary>,
  context: { command: string; settings: Record<string, string | number | boolean>; title?: string },
): string {
  const lines = [
    ...resultsHeader(context.title ?? "Simulator results", context.command),
    "| policy | mean TTFT (s) | P50 (s) | P90 (s) | P99 (s) | SLO attainment | rejected | hit ratio | prefill tokens (M) | transferred (M) |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const [name, s] of Object.entries(summaries)) {
    lines.push(
      `| ${name} | ${fixed(s.meanTtftS, 2)} | ${fixed(s.p50TtftS, 2)} | ${fixed(s.p90TtftS, 2)} | ${
        fixed(s.p99TtftS, 2)
      } | ` +
        `${(s.sloAttainment * 100).toFixed(1)}% | ${s.rejected} | ${fixed(s.hitRatio, 3)} | ` +
        `${fixed(s.prefillTokens / 1e6, 1)} | ${fixed(s.transferTokens / 1e6, 1)} |`,
    );
  }
  lines.push("", "Settings:", "");
  for (const [key, value] of Object.entries(context.settings)) lines.push(`- ${key}: ${value}`);
  lines.push("");
  return lines.join("\n");
}

/** The prefill model as the settings list it. */
export function describeModel(model: PrefillModelCoefficients): string {
  return `${model.linear}·n_new + ${model.quadratic}·n_new·(n_new + 2·n_cached) + ` +
    `${model.cachedLinear ?? 0}·n_cached + ${model.constant ?? 0}`;
}

/** JSON replacer: non-integers to six significant digits. */
export function rounded(_key: string, value: unknown): unknown {
  return typeof value === "number" && !Number.isInteger(value)
    ? Number(value.toPrecision(6))
    : value;
}

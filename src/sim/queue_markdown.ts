/** The flow-control queue's Markdown tables (src/sim/queue_report.ts), one row per run or band. */
import type { QueueReport } from "./queue_report.ts";
import { fixed, percent } from "./number_format.ts";

/** Goodput, TTFT (queue wait included), refusals and waits per run, then per run and band. */
export function queueMarkdown(reports: Record<string, QueueReport>, sloTtftS: number): string {
  const lines = [
    `TTFT is the client's: queue wait included. Goodput: requests served within the ${sloTtftS} s`,
    "TTFT SLO per second of the trace's arrival span.",
    "",
    "| run | goodput (req/s) | SLO attainment | mean TTFT (s) | P99 TTFT (s) | rejected | of which full / expired | queued | mean / P99 / max wait (s) |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const [label, r] of Object.entries(reports)) {
    const full = r.rejectedByReason["queue_full"] ?? 0;
    const expired = r.rejectedByReason["queue_timeout"] ?? 0;
    lines.push(
      `| ${label} | ${fixed(r.goodputRps, 3)} | ${percent(r.sloAttainment)} | ${
        fixed(r.meanTtftS, 2)
      } | ` +
        `${fixed(r.p99TtftS, 2)} | ${r.rejected} | ${full} / ${expired} | ${r.queued} | ` +
        `${waits(r)} |`,
    );
  }
  lines.push(
    "",
    "| run | band | requests | served | within SLO | queued | expired or pushed out | mean / P99 / max wait (s) | P99 TTFT (s) |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  );
  for (const [label, r] of Object.entries(reports)) {
    for (const b of r.bands) {
      lines.push(
        `| ${label} | ${b.band} | ${b.requests} | ${b.served} | ${b.withinSlo} | ${b.queued} | ` +
          `${b.expired} | ${waits(b)} | ${fixed(b.p99TtftS, 2)} |`,
      );
    }
  }
  return lines.join("\n") + "\n";
}

function waits(r: { meanWaitS: number; p99WaitS: number; maxWaitS: number }): string {
  if (Number.isNaN(r.maxWaitS)) return "-";
  return `${fixed(r.meanWaitS, 1)} / ${fixed(r.p99WaitS, 1)} / ${fixed(r.maxWaitS, 1)}`;
}

/**
 * `deno task soak --minutes N [--target demo|fakes] [--concurrency N]`: steady loopback traffic
 * for N minutes, RSS, open fds and leases printed every 30 s; exit 1 when RSS strays beyond ±20 %
 * of its value after the first minute, fds grow, leases remain at the end, or a request failed.
 */
import { parseArgs } from "node:util";
import { runSoak } from "./run_soak.ts";
import type { SoakTargetName } from "./soak_targets.ts";
import { mb, type SoakSample } from "./soak_verdict.ts";

const USAGE = "Usage: deno task soak --minutes N [--target demo|fakes] [--concurrency N]";

export async function main(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(`${USAGE}\n(--minutes must exceed 1: the first minute is the warm-up; default 10)`);
    return 0;
  }
  let flags: { minutes?: string; target?: string; concurrency?: string };
  try {
    flags = parseArgs({
      args,
      options: {
        minutes: { type: "string" },
        target: { type: "string" },
        concurrency: { type: "string" },
      },
    }).values;
  } catch (error) {
    console.error(`${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  const minutes = Number(flags.minutes ?? 10);
  const target = (flags.target ?? "demo") as SoakTargetName;
  const concurrency = Number(flags.concurrency ?? 8);
  if (!(minutes > 1) || !["demo", "fakes"].includes(target) || !(concurrency >= 1)) {
    console.error(`${USAGE}\n(--minutes must exceed 1: the first minute is the warm-up)`);
    return 2;
  }
  console.log(`soak: ${target}, ${minutes} min, ${concurrency} concurrent requests`);
  const report = await runSoak({
    target,
    durationMs: minutes * 60_000,
    sampleEveryMs: 30_000,
    warmupMs: 60_000,
    rssTolerance: 0.2,
    fdSlack: 16,
    concurrency,
    onSample: (sample) => console.log(line(sample)),
  });
  console.log(`end: ${line(report.final)}`);
  if (report.verdict.baseline) console.log(`baseline: ${line(report.verdict.baseline)}`);
  for (const failure of report.failures) console.log(`failed request: ${failure}`);
  for (const problem of report.verdict.problems) console.log(`FAIL: ${problem}`);
  console.log(report.verdict.ok ? "soak: PASS" : "soak: FAIL");
  return report.verdict.ok ? 0 : 1;
}

function line(s: SoakSample): string {
  return `t=${(s.atMs / 1000).toFixed(0)}s rss=${
    mb(s.rssBytes)
  } fds=${s.openFds} leases=${s.leases} ` +
    `requests=${s.requests} failed=${s.failed}`;
}

if (import.meta.main) Deno.exit(await main(Deno.args));

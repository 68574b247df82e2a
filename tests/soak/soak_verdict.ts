/**
 * The soak's verdict on its samples: memory flat within a band around its value once warm, file
 * descriptors not growing, no lease left, no failed request.
 */
export interface SoakSample {
  /** Milliseconds since the traffic started. */
  atMs: number;
  rssBytes: number;
  openFds: number;
  leases: number;
  requests: number;
  failed: number;
}

export interface SoakLimits {
  /** Samples before this are warm-up; the first one at or after it is the baseline. */
  warmupMs: number;
  /** Allowed RSS deviation from the baseline, as a fraction (0.2: ±20 %). */
  rssTolerance: number;
  /** Open descriptors the end may hold beyond the baseline (connections in a pool). */
  fdSlack: number;
}

export interface SoakVerdict {
  ok: boolean;
  problems: string[];
  baseline?: SoakSample;
}

/** `samples` in time order; `final` is taken once the traffic stopped and settled. */
export function judgeSoak(
  samples: readonly SoakSample[],
  final: SoakSample,
  limits: SoakLimits,
): SoakVerdict {
  const problems: string[] = [];
  const baseline = samples.find((s) => s.atMs >= limits.warmupMs);
  if (!baseline) problems.push(`no sample after the ${limits.warmupMs} ms warm-up`);
  for (const sample of baseline ? [...samples, final].filter((s) => s.atMs > baseline.atMs) : []) {
    const ratio = sample.rssBytes / baseline!.rssBytes;
    if (Math.abs(ratio - 1) > limits.rssTolerance) {
      problems.push(
        `RSS ${mb(sample.rssBytes)} at ${seconds(sample.atMs)} is ${
          ((ratio - 1) * 100).toFixed(1)
        }% from the baseline ${mb(baseline!.rssBytes)} (limit ±${limits.rssTolerance * 100}%)`,
      );
    }
  }
  if (baseline && final.openFds > baseline.openFds + limits.fdSlack) {
    problems.push(
      `open fds grew from ${baseline.openFds} to ${final.openFds} (slack ${limits.fdSlack})`,
    );
  }
  if (final.leases !== 0) problems.push(`${final.leases} leases still held at the end`);
  if (final.failed !== 0) problems.push(`${final.failed} of ${final.requests} requests failed`);
  if (final.requests === 0) problems.push("no request was sent");
  return baseline ? { ok: problems.length === 0, problems, baseline } : { ok: false, problems };
}

export function mb(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(0)} MB`;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(0)} s`;
}

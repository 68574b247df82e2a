/**
 * One soak: start a target, drive steady traffic for `durationMs`, sample the watched process
 * every `sampleEveryMs`, stop the traffic, let the router settle, and judge.
 */
import { sampleProcess } from "./process_sample.ts";
import { routerLeases } from "./router_leases.ts";
import { type SoakTargetName, startSoakTarget } from "./soak_targets.ts";
import { startSoakTraffic } from "./soak_traffic.ts";
import { judgeSoak, type SoakLimits, type SoakSample, type SoakVerdict } from "./soak_verdict.ts";

export interface SoakOptions extends SoakLimits {
  target: SoakTargetName;
  durationMs: number;
  sampleEveryMs: number;
  concurrency: number;
  /** Called with each sample as it is taken. */
  onSample?: (sample: SoakSample) => void;
}

export interface SoakReport {
  samples: SoakSample[];
  final: SoakSample;
  verdict: SoakVerdict;
  failures: string[];
}

/** After the traffic stops, how long the leases get to return to zero. */
const SETTLE_MS = 10_000;

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const target = await startSoakTarget(options.target);
  try {
    const traffic = startSoakTraffic(target.url, target.requestOf, options.concurrency);
    const started = performance.now();
    const sample = async (): Promise<SoakSample> => ({
      atMs: performance.now() - started,
      ...await sampleProcess(target.pid),
      leases: await routerLeases(target.url),
      requests: traffic.requests,
      failed: traffic.failed,
    });
    const samples: SoakSample[] = [];
    for (let next = options.sampleEveryMs; next <= options.durationMs;) {
      await delay(started + next - performance.now());
      const taken = await sample();
      samples.push(taken);
      options.onSample?.(taken);
      next += options.sampleEveryMs;
    }
    await traffic.stop();
    const final = await settled(sample);
    return {
      samples,
      final,
      verdict: judgeSoak(samples, final, options),
      failures: traffic.failures,
    };
  } finally {
    await target.close();
  }
}

/** Samples until the leases are back to zero (or SETTLE_MS passed): the end state. */
async function settled(sample: () => Promise<SoakSample>): Promise<SoakSample> {
  const deadline = performance.now() + SETTLE_MS;
  for (;;) {
    const taken = await sample();
    if (taken.leases === 0 || performance.now() > deadline) return taken;
    await delay(50);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

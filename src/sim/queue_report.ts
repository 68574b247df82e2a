/**
 * What the flow-control queue did in one replay: the client's TTFT (queue wait included), SLO
 * attainment, goodput, refusals, and per priority band the waits and expiries. Pure.
 */
import type { SimResult } from "./simulator.ts";
import { mean, percentile } from "./summary.ts";

export interface BandReport {
  band: number;
  requests: number;
  served: number;
  /** Served with a TTFT (wait included) within the SLO. */
  withinSlo: number;
  /** Refused: by admission, a full queue or the TTL. */
  rejected: number;
  /** Waited in the queue (admitted later, expired, or pushed out by a more urgent one). */
  queued: number;
  /** Left the queue unserved: expired, or pushed out of a full queue by a more urgent one. */
  expired: number;
  /** Over the requests that waited; NaN when none did. */
  meanWaitS: number;
  p99WaitS: number;
  maxWaitS: number;
  meanTtftS: number;
  p99TtftS: number;
}

export interface QueueReport {
  requests: number;
  served: number;
  withinSlo: number;
  sloAttainment: number;
  /** Requests served within the TTFT SLO per second of the trace's arrival span. */
  goodputRps: number;
  meanTtftS: number;
  p99TtftS: number;
  rejected: number;
  rejectedByReason: Record<string, number>;
  queued: number;
  expired: number;
  meanWaitS: number;
  p99WaitS: number;
  maxWaitS: number;
  bands: BandReport[];
}

type ReportInput = Pick<
  SimResult,
  "ttftS" | "instance" | "band" | "queueWaitS" | "arrivalSpanS" | "rejectedByReason"
>;

export function queueReport(result: ReportInput, sloTtftS: number): QueueReport {
  const all = bandReport(result, sloTtftS, () => true, -1);
  const bandIds = [...new Set(result.band)].sort((a, b) => a - b);
  const { band: _, ...totals } = all;
  return {
    ...totals,
    sloAttainment: all.requests === 0 ? 0 : all.withinSlo / all.requests,
    goodputRps: result.arrivalSpanS > 0 ? all.withinSlo / result.arrivalSpanS : NaN,
    rejectedByReason: { ...result.rejectedByReason },
    bands: bandIds.map((b) => bandReport(result, sloTtftS, (i) => result.band[i] === b, b)),
  };
}

function bandReport(
  result: ReportInput,
  sloTtftS: number,
  member: (i: number) => boolean,
  band: number,
): BandReport {
  const ttfts: number[] = [], waits: number[] = [];
  let requests = 0, expired = 0, withinSlo = 0;
  for (let i = 0; i < result.ttftS.length; i++) {
    if (!member(i)) continue;
    requests++;
    const ttft = result.ttftS[i], wait = result.queueWaitS[i];
    if (!Number.isNaN(ttft)) ttfts.push(ttft);
    if (ttft <= sloTtftS) withinSlo++;
    if (Number.isNaN(wait)) continue;
    waits.push(wait);
    if (result.instance[i] < 0) expired++;
  }
  ttfts.sort((a, b) => a - b);
  waits.sort((a, b) => a - b);
  return {
    band,
    requests,
    served: ttfts.length,
    withinSlo,
    rejected: requests - ttfts.length,
    queued: waits.length,
    expired,
    meanWaitS: mean(waits),
    p99WaitS: percentile(waits, 0.99),
    maxWaitS: waits.length === 0 ? NaN : waits[waits.length - 1],
    meanTtftS: mean(ttfts),
    p99TtftS: percentile(ttfts, 0.99),
  };
}

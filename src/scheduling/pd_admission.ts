/**
 * Admission for prefill/decode disaggregation, as the Mooncake paper's Algorithm 1: refuse when
 * the best prefill instance breaks the TTFT SLO or the chosen decode instance the TBT SLO. Two
 * ways to judge the decode side before any prefill work starts:
 *   early      §7.2: by the decode load now;
 *   predicted  §7.4: by the decode load expected when this request's prefill finishes (requests
 *              prefilling now that will join it, minus those expected to finish decoding), which
 *              damps the anti-phase oscillation of prefill and decode load.
 * Pure.
 */
import { type AdmissionVerdict, admit } from "./admission.ts";
import { type DecodeModel, decodeStepS } from "./decode_model.ts";

export const EARLY_REJECTION_MODES = ["early", "predicted"] as const;
export type EarlyRejection = typeof EARLY_REJECTION_MODES[number];

export interface DecodeLoadForecast {
  /** Requests decoding on the instance now. */
  runningNow: number;
  /** Seconds until each request now prefilling for this instance finishes its prefill. */
  joiningInS: readonly number[];
  /** Mean decode duration of a request, seconds (how fast the running ones leave). */
  meanDecodeS: number;
}

/**
 * Requests expected on the decode instance `atS` seconds from now: the running ones that will not
 * have finished (their remaining decode time taken as uniform over [0, meanDecodeS]) plus the
 * prefilling ones that will have joined and not yet finished (a joiner decodes for meanDecodeS).
 */
export function forecastDecodeLoad(forecast: DecodeLoadForecast, atS: number): number {
  const leaving = forecast.meanDecodeS > 0
    ? Math.min(1, Math.max(0, atS) / forecast.meanDecodeS)
    : 1;
  const joining = forecast.joiningInS.filter((s) => s <= atS && atS - s < forecast.meanDecodeS)
    .length;
  return Math.max(0, forecast.runningNow * (1 - leaving)) + joining;
}

export interface PdAdmissionInput {
  /** Best predicted TTFT on the prefill side (queue + prefill + transfer). */
  predictedTtftS?: number;
  prefillInstanceId?: string;
  /** The chosen decode instance and its load forecast; absent: no decode instance to judge. */
  decode?: { instanceId: string; forecast: DecodeLoadForecast };
}

export interface PdAdmissionOptions {
  enabled: boolean;
  mode: EarlyRejection;
  ttftSloS?: number;
  tbtSloS?: number;
  decodeModel: DecodeModel;
}

/** The verdict, with the decode batch size and TBT it was judged on (for explanations). */
export function admitPd(
  input: PdAdmissionInput,
  options: PdAdmissionOptions,
): { verdict: AdmissionVerdict; decodeBatch?: number; predictedTbtS?: number } {
  let decodeBatch: number | undefined;
  let predictedTbtS: number | undefined;
  if (input.decode) {
    const { forecast } = input.decode;
    decodeBatch = options.mode === "predicted"
      ? forecastDecodeLoad(forecast, input.predictedTtftS ?? 0)
      : forecast.runningNow;
    predictedTbtS = decodeStepS(options.decodeModel, decodeBatch + 1);
  }
  const verdict = admit(
    { predictedTtftS: input.predictedTtftS, predictedTbtS, instanceId: input.prefillInstanceId },
    { enabled: options.enabled, ttftSloS: options.ttftSloS, tbtSloS: options.tbtSloS },
  );
  return { verdict, decodeBatch, predictedTbtS };
}

/**
 * Admission for prefill/decode disaggregation, as the Mooncake paper's Algorithm 1: refuse when
 * the best prefill instance breaks the TTFT SLO or the chosen decode instance the TBT SLO. Two
 * ways to judge the decode side before any prefill work starts:
 *   early      §7.2: by the decode load now;
 *   predicted  §7.4: by the decode load expected when this request's prefill finishes (requests
 *              prefilling now that will join it, minus those expected to finish decoding), which
 *              damps the anti-phase oscillation of prefill and decode load;
 *   committed  by every request bound for it: decoding now and prefilling for it, as if none
 *              left first. `early` does not see what it admitted a moment ago, so a burst it
 *              admits (a flow-control queue's, as a batch frees) lands on one batch at once.
 * The decode load judged is the pool's (the paper: "the greater load between the prefill and
 * decoding pools", "the average TBT ratio of all decoding instances") or the chosen instance's.
 * Pure.
 */
import { type AdmissionVerdict, admit } from "./admission.ts";
import { type DecodeModel, decodeStepS } from "./decode_model.ts";

export const EARLY_REJECTION_MODES = ["early", "predicted", "committed"] as const;
export type EarlyRejection = typeof EARLY_REJECTION_MODES[number];

/** Whose decode load is judged: the chosen instance alone, or the mean over the decode pool. */
export const DECODE_LOAD_SCOPES = ["instance", "pool"] as const;
export type DecodeLoadScope = typeof DECODE_LOAD_SCOPES[number];

export interface DecodeLoadForecast {
  /** Requests decoding now, on the instance or over the `instances` of a pool. */
  runningNow: number;
  /** Seconds until each request now prefilling for them finishes its prefill. */
  joiningInS: readonly number[];
  /** Mean decode duration of a request, seconds (how fast the running ones leave). */
  meanDecodeS: number;
  /** Decode instances the requests spread over (default 1: one instance's own forecast). */
  instances?: number;
  /**
   * Mean KV tokens of a request decoding there (the engine's reported KV use over its running
   * requests); absent: the decode model's `kvTokensPerRequest`.
   */
  kvTokensPerRequest?: number;
}

/**
 * Requests expected per decode instance `atS` seconds from now: the running ones that will not
 * have finished (their remaining decode time taken as uniform over [0, meanDecodeS]) plus the
 * prefilling ones that will have joined and not yet finished (a joiner decodes for meanDecodeS).
 */
export function forecastDecodeLoad(forecast: DecodeLoadForecast, atS: number): number {
  const leaving = forecast.meanDecodeS > 0
    ? Math.min(1, Math.max(0, atS) / forecast.meanDecodeS)
    : 1;
  const joining = forecast.joiningInS.filter((s) => s <= atS && atS - s < forecast.meanDecodeS)
    .length;
  return (Math.max(0, forecast.runningNow * (1 - leaving)) + joining) / (forecast.instances ?? 1);
}

/** The decode pool as one forecast over its instances (the learned decode time is shared). */
export function poolForecast(forecasts: readonly DecodeLoadForecast[]): DecodeLoadForecast {
  let runningNow = 0;
  let instances = 0;
  const joiningInS: number[] = [];
  let kvTokens: number | undefined = 0;
  for (const f of forecasts) {
    runningNow += f.runningNow;
    instances += f.instances ?? 1;
    joiningInS.push(...f.joiningInS);
    // The pool's mean is known when every instance running something reports its own (an idle
    // one, which reports none, weighs nothing).
    if (f.runningNow <= 0) continue;
    kvTokens = f.kvTokensPerRequest === undefined || kvTokens === undefined
      ? undefined
      : kvTokens + f.kvTokensPerRequest * f.runningNow;
  }
  return withReportedKv(
    { runningNow, joiningInS, meanDecodeS: forecasts[0]?.meanDecodeS ?? 0, instances },
    kvTokens === undefined || runningNow <= 0 ? undefined : kvTokens / runningNow,
  );
}

/** `forecast` with the KV per running request its engine reports, when it reports one. */
export function withReportedKv(
  forecast: DecodeLoadForecast,
  kvTokensPerRequest: number | undefined,
): DecodeLoadForecast {
  return kvTokensPerRequest === undefined ? forecast : { ...forecast, kvTokensPerRequest };
}

/**
 * The decode step once this request joins a batch of `batch` requests per instance: with the
 * instances' own KV, each of the batch holds their mean and the request its prompt (a
 * long-context batch steps slower than the model's per-request guess says).
 */
function joinedStepS(
  model: DecodeModel,
  forecast: DecodeLoadForecast,
  batch: number,
  promptTokens: number | undefined,
): number {
  const share = 1 / (forecast.instances ?? 1);
  // Without KV figures, the model's own guess per request, computed as it always was (the same
  // sum in another order can differ in its last bit, and change a refusal at the SLO's edge).
  if (forecast.kvTokensPerRequest === undefined && promptTokens === undefined) {
    return decodeStepS(model, batch + share);
  }
  const guess = model.kvTokensPerRequest ?? 0;
  const perRequest = forecast.kvTokensPerRequest ?? guess;
  return decodeStepS(model, batch + share, batch * perRequest + (promptTokens ?? guess) * share);
}

export interface PdAdmissionInput {
  /** Best predicted TTFT on the prefill side (queue + prefill + transfer). */
  predictedTtftS?: number;
  prefillInstanceId?: string;
  /** The chosen decode instance and its load forecast; absent: no decode instance to judge. */
  decode?: { instanceId: string; forecast: DecodeLoadForecast };
  /** The request's prompt, the KV it brings to the batch (absent: the model's guess). */
  promptTokens?: number;
}

export interface PdAdmissionOptions {
  enabled: boolean;
  mode: EarlyRejection;
  ttftSloS?: number;
  tbtSloS?: number;
  decodeModel: DecodeModel;
  /** The decode engines' batch cap (`max_num_seqs`); unset: only the TBT SLO bounds a batch. */
  maxDecodeBatch?: number;
}

/** The verdict, with the decode batch size and TBT it was judged on (for explanations). */
export function admitPd(
  input: PdAdmissionInput,
  options: PdAdmissionOptions,
): { verdict: AdmissionVerdict; decodeBatch?: number; predictedTbtS?: number } {
  let decodeBatch: number | undefined;
  let predictedTbtS: number | undefined;
  let joinedBatch: number | undefined;
  // An empty pool has nothing to judge (its callers pass a pool only with an instance chosen).
  if (input.decode && (input.decode.forecast.instances ?? 1) > 0) {
    const { forecast } = input.decode;
    const instances = forecast.instances ?? 1;
    decodeBatch = options.mode === "predicted"
      ? forecastDecodeLoad(forecast, input.predictedTtftS ?? 0)
      : options.mode === "committed"
      ? (forecast.runningNow + forecast.joiningInS.length) / instances
      : forecast.runningNow / instances;
    // This request adds one to the instance, or its share to the pool's mean.
    predictedTbtS = joinedStepS(options.decodeModel, forecast, decodeBatch, input.promptTokens);
    joinedBatch = decodeBatch + 1 / instances;
  }
  const verdict = admit(
    {
      predictedTtftS: input.predictedTtftS,
      predictedTbtS,
      decodeBatch: joinedBatch,
      instanceId: input.prefillInstanceId,
    },
    {
      enabled: options.enabled,
      ttftSloS: options.ttftSloS,
      tbtSloS: options.tbtSloS,
      maxDecodeBatch: options.maxDecodeBatch,
    },
  );
  return { verdict, decodeBatch, predictedTbtS };
}

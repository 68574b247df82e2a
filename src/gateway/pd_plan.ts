/**
 * The decode side of a disaggregated plan (docs/compat.md §7): which decode instance, and
 * whether the request is admitted at all (the Mooncake paper's Algorithm 1, judged before any
 * prefill work starts). The prefill side is the model's policy over prefill and neutral instances.
 */
import type { DecodeOutlook } from "../cluster/decode_outlook.ts";
import type { InstanceEntry } from "../cluster/model_cluster.ts";
import type { ModelConfig } from "../config/schema.ts";
import type { DecodePlan } from "../contracts.ts";
import type { AdmissionVerdict } from "../scheduling/admission.ts";
import {
  type DecodeCandidate,
  type DecodeDecision,
  selectDecode,
} from "../scheduling/decode_policy.ts";
import {
  admitPd,
  type DecodeLoadForecast,
  poolForecast,
  withReportedKv,
} from "../scheduling/pd_admission.ts";
import type { Candidate } from "../scheduling/types.ts";
import { decideLocalPrefill, type LocalPrefillVerdict } from "../scheduling/local_prefill.ts";
import type { TtftModelParams } from "../scheduling/ttft_estimate.ts";
import type { ModelRuntime } from "../runtime/model_runtime.ts";

/** Prefill-side candidates (prefill and neutral instances) and the decode instances apart. */
export function splitByRole(
  runtime: ModelRuntime,
  candidates: Candidate[],
  entries: Map<string, InstanceEntry>,
): { prefillSide: Candidate[]; decode?: DecodeCandidate[]; decodeAsPrefill?: Candidate[] } {
  if (!runtime.config.disaggregation) return { prefillSide: candidates };
  const prefillSide: Candidate[] = [];
  const decode: DecodeCandidate[] = [];
  const decodeAsPrefill: Candidate[] = [];
  for (const candidate of candidates) {
    if (entries.get(candidate.id)?.config.role !== "decode") {
      prefillSide.push(candidate);
      continue;
    }
    decodeAsPrefill.push(candidate);
    decode.push({
      id: candidate.id,
      healthy: candidate.healthy,
      runningRequests: candidate.runningRequests,
      kvUsage: runtime.cluster.kvUsage(candidate.id),
      kvTokensPerRequest: runtime.cluster.kvTokensPerRequest(candidate.id),
      prefixTokens: candidate.localPrefixTokens,
    });
  }
  return { prefillSide, decode, decodeAsPrefill };
}

/**
 * Conditional disaggregation (src/scheduling/local_prefill.ts): whether the chosen decode
 * instance prefills the request itself; undefined when the model's mode is off.
 */
export function planLocalPrefill(
  config: Pick<ModelConfig, "disaggregation" | "slo">,
  decode: DecodePlan,
  decodeAsPrefill: readonly Candidate[],
  request: {
    promptTokens: number;
    remoteTtftS?: number;
    ttft: TtftModelParams;
    /** The pool's prefix, and whether the engines load it (local_prefill.ts). */
    pool?: { prefixTokens: number; loads: boolean };
  },
): LocalPrefillVerdict | undefined {
  const pd = config.disaggregation;
  const options = pd?.localPrefill;
  const chosen = decodeAsPrefill.find((c) => c.id === decode.decision.ranking[0]);
  if (!pd || !options || options.mode === "off" || !chosen) return undefined;
  return decideLocalPrefill(
    {
      promptTokens: request.promptTokens,
      decode: chosen,
      remoteTtftS: request.remoteTtftS,
      pool: request.pool,
    },
    {
      mode: options.mode,
      maxLocalTokens: options.maxTokens,
      ttft: request.ttft,
      decodeModel: pd.decodeModel,
      tbtSloS: config.slo.tbtS,
      chunkTokens: options.chunkTokens,
    },
  );
}

/** What the decode plan reads of a model's runtime. */
export interface DecodePlanContext {
  config: Pick<ModelConfig, "disaggregation" | "slo">;
  decodeOutlook?: DecodeOutlook;
}

/**
 * The forecast admission judges: the chosen instance's, or with `decodeLoad: pool` the pool's
 * over the instances that can take the request (healthy, KV cache not full); with
 * `decodeBatchKv: reported`, each with the KV per request its engine reports.
 */
function decodeForecast(
  pd: Pick<NonNullable<ModelConfig["disaggregation"]>, "decodeLoad" | "decodeBatchKv">,
  outlook: DecodeOutlook,
  candidates: readonly DecodeCandidate[],
  decision: DecodeDecision,
  chosen: DecodeCandidate,
): DecodeLoadForecast {
  const reported = pd.decodeBatchKv === "reported";
  const forecastOf = (c: DecodeCandidate) =>
    withReportedKv(
      outlook.forecast(c.id, c.runningRequests),
      reported ? c.kvTokensPerRequest : undefined,
    );
  if (pd.decodeLoad !== "pool") return forecastOf(chosen);
  return poolForecast(candidates.filter((c) => decision.ranking.includes(c.id)).map(forecastOf));
}

/**
 * The decode choice and the admission verdict for a request of `request.promptTokens` whose
 * prefill goes to `request.prefillId` (a prefill-role instance) with the predicted TTFT.
 */
export function planDecode(
  runtime: DecodePlanContext,
  candidates: DecodeCandidate[],
  request: { prefillId?: string; predictedTtftS?: number; promptTokens?: number },
): { decode: DecodePlan; admission: AdmissionVerdict } {
  const pd = runtime.config.disaggregation!;
  const decision = selectDecode(candidates, { model: pd.decodeModel, policy: pd.decodePolicy });
  const chosen = candidates.find((c) => c.id === decision.ranking[0]);
  const slo = runtime.config.slo;
  const outlook = runtime.decodeOutlook;
  const { verdict, decodeBatch, predictedTbtS } = admitPd(
    {
      predictedTtftS: request.predictedTtftS,
      prefillInstanceId: request.prefillId,
      decode: chosen && outlook
        ? {
          instanceId: chosen.id,
          forecast: decodeForecast(pd, outlook, candidates, decision, chosen),
        }
        : undefined,
      promptTokens: request.promptTokens,
    },
    {
      enabled: slo.admission,
      mode: pd.earlyRejection,
      ttftSloS: slo.ttftS,
      tbtSloS: slo.tbtS,
      decodeModel: pd.decodeModel,
      maxDecodeBatch: pd.decodeMaxBatch,
    },
  );
  return {
    decode: {
      protocol: pd.protocol,
      candidates,
      decision,
      judgedBatch: decodeBatch,
      judgedLoad: decodeBatch === undefined ? undefined : pd.decodeLoad,
      judgedMode: decodeBatch === undefined ? undefined : pd.earlyRejection,
      predictedTbtS,
    },
    admission: verdict,
  };
}

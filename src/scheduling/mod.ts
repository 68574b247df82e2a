/** The scheduling core's public surface: policies, the prefill-time model, admission. Pure. */
export type * from "./types.ts";
export {
  createPolicy,
  isPolicyName,
  POLICY_NAMES,
  policyNames,
  policyParamKeys,
  registerPolicy,
  resolveTtftParams,
} from "./registry.ts";
export type { PolicyName, PolicyParams } from "./registry.ts";
export { type PolicyFactory, policyFactory } from "./policy_factory.ts";
export * as scorers from "./scorers.ts";
export { buildDecision } from "./policies/rank.ts";
export {
  fitPrefillModel,
  MOONCAKE_PREFILL_MODEL,
  PrefillModelEstimator,
  prefillTimeS,
} from "./prefill_model.ts";
export type {
  PrefillFit,
  PrefillFitOptions,
  PrefillModelEstimatorOptions,
  PrefillSample,
} from "./prefill_model.ts";
export { DEFAULT_TTFT_PARAMS, estimateQueueS, estimateTtft } from "./ttft_estimate.ts";
export type { TtftEstimate, TtftModelParams } from "./ttft_estimate.ts";
export { admit, admitByLoad } from "./admission.ts";
export type {
  AdmissionInput,
  AdmissionOptions,
  AdmissionVerdict,
  LoadThresholdOptions,
} from "./admission.ts";
export { decodeStepS, DEFAULT_DECODE_MODEL, predictTbtS } from "./decode_model.ts";
export type { DecodeModel } from "./decode_model.ts";
export { DECODE_POLICY_NAMES, selectDecode } from "./decode_policy.ts";
export type {
  DecodeCandidate,
  DecodeDecision,
  DecodePolicyName,
  DecodeScore,
} from "./decode_policy.ts";
export { admitPd, EARLY_REJECTION_MODES, forecastDecodeLoad } from "./pd_admission.ts";
export type { DecodeLoadForecast, EarlyRejection, PdAdmissionInput } from "./pd_admission.ts";

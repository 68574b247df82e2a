import type { RequestObserver, RequestRecord } from "../contracts.ts";
import type { DecisionInputs } from "../scheduling/decision_replay.ts";
import type { LocalPrefillVerdict } from "../scheduling/local_prefill.ts";

/** One dispatch decision as the dashboard and `/admin/decisions` show it. */
export interface DecisionEntry {
  requestId: string;
  /** Wall-clock ms at arrival. */
  at: number;
  model: string;
  arm: string;
  policy: string;
  endpoint: string;
  stream: boolean;
  promptTokens: number;
  tokenSource: string;
  lookup: { outcome: string; keys: number; elapsedMs: number } | null;
  poolPrefixTokens: number;
  /** Why the request was dispatched by load alone (KV agreement blind), or null. */
  kvLoadOnly: string | null;
  chosen: string | null;
  /** Every candidate's score terms, best first. */
  candidates: {
    id: string;
    healthy: boolean;
    localPrefixTokens: number;
    waitingPrefillTokens: number;
    score: number;
    terms: Record<string, number>;
    excluded?: string;
  }[];
  predictedTtftS: number | null;
  /** A disaggregated request: the pair, and the decode side's terms and judged batch. */
  pd: {
    protocol: string;
    prefill: string | null;
    decode: string | null;
    judgedBatch: number | null;
    /** "instance" or "pool": whose batch the admission judged. */
    judgedLoad: string | null;
    /** "early", "predicted" or "committed": how it counted that batch. */
    judgedMode: string | null;
    predictedTbtS: number | null;
    /** Conditional disaggregation's verdict (null: off): a local one prefilled on `decode`. */
    localPrefill: LocalPrefillVerdict | null;
    decodeCandidates: {
      id: string;
      score: number;
      terms: Record<string, number>;
      excluded?: string;
    }[];
  } | null;
  admitted: boolean;
  /** Why a refused request was refused. */
  rejection: string | null;
  attempts: { instance: string; leg?: string; status?: number; failure?: string }[];
  status: number;
  outcome: string;
  ttftS: number | null;
  durationS: number | null;
  engineCachedTokens: number | null;
  /** What the prefill decision was made from: replayDecision() gives the same ranking. */
  inputs: DecisionInputs;
}

/** A bounded ring of the most recent decisions, newest last. */
export class DecisionLog implements RequestObserver {
  readonly #capacity: number;
  readonly #entries: DecisionEntry[] = [];

  constructor(capacity = 200) {
    this.#capacity = Math.max(1, capacity);
  }

  onFinished(record: RequestRecord): void {
    const plan = record.plan;
    if (!plan) return; // rejected before planning (bad input): not a decision
    const order = new Map(plan.decision.ranking.map((id, i) => [id, i]));
    const candidates = plan.candidates.map((c) => {
      const score = plan.decision.scores.find((s) => s.id === c.id);
      return {
        id: c.id,
        healthy: c.healthy,
        localPrefixTokens: c.localPrefixTokens,
        waitingPrefillTokens: Math.round(c.waitingPrefillTokens),
        score: score?.score ?? Number.NaN,
        terms: score?.terms ?? {},
        ...(score?.excluded ? { excluded: score.excluded } : {}),
      };
    }).sort((a, b) => (order.get(a.id) ?? 1e9) - (order.get(b.id) ?? 1e9));
    this.#entries.push({
      requestId: record.requestId,
      at: record.startedAtWallMs,
      model: record.model,
      arm: record.arm,
      policy: plan.policy.name,
      endpoint: record.endpoint,
      stream: record.stream,
      promptTokens: plan.promptTokens,
      tokenSource: plan.tokenSource,
      lookup: plan.lookup
        ? {
          outcome: plan.lookup.outcome,
          keys: plan.lookup.keysQueried,
          elapsedMs: Math.round(plan.lookup.elapsedMs * 100) / 100,
        }
        : null,
      poolPrefixTokens: plan.poolPrefixTokens,
      kvLoadOnly: plan.kvLoadOnly ?? null,
      chosen: record.instanceId ?? null,
      candidates,
      predictedTtftS: plan.predictedTtftS ?? null,
      pd: pdEntry(record),
      admitted: plan.admission.admit,
      rejection: plan.admission.admit ? null : plan.admission.message,
      attempts: record.attempts.map((a) => ({
        instance: a.instanceId,
        ...(a.leg ? { leg: a.leg } : {}),
        ...(a.status !== undefined ? { status: a.status } : {}),
        ...(a.failure ? { failure: a.failure } : {}),
      })),
      status: record.status,
      outcome: record.outcome,
      ttftS: record.ttftS ?? null,
      durationS: record.durationS ?? null,
      engineCachedTokens: record.usage.cachedTokens ?? null,
      inputs: plan.inputs,
    });
    if (this.#entries.length > this.#capacity) this.#entries.shift();
  }

  /** The newest `limit` decisions, newest first. */
  recent(limit = 50): DecisionEntry[] {
    return this.#entries.slice(-limit).reverse();
  }
}

function pdEntry(record: RequestRecord): DecisionEntry["pd"] {
  const decode = record.plan?.decode;
  if (!decode) return null;
  const order = new Map(decode.decision.ranking.map((id, i) => [id, i]));
  return {
    protocol: decode.protocol,
    prefill: record.prefillInstanceId ?? null,
    decode: record.prefillInstanceId || decode.localPrefill?.local
      ? record.instanceId ?? null
      : null,
    judgedBatch: decode.judgedBatch ?? null,
    judgedLoad: decode.judgedLoad ?? null,
    judgedMode: decode.judgedMode ?? null,
    predictedTbtS: decode.predictedTbtS ?? null,
    localPrefill: decode.localPrefill ? { ...decode.localPrefill } : null,
    decodeCandidates: [...decode.decision.scores]
      .sort((a, b) => (order.get(a.id) ?? 1e9) - (order.get(b.id) ?? 1e9))
      .map((s) => ({
        id: s.id,
        score: s.score,
        terms: { ...s.terms },
        ...(s.excluded ? { excluded: s.excluded } : {}),
      })),
  };
}

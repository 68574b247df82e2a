/** Finished request records for observer tests, with only the plan fields observers read. */
import type { DispatchPlan, RequestRecord } from "../../src/contracts.ts";

export interface RecordSpec {
  model?: string;
  arm?: string;
  instance?: string;
  promptTokens?: number;
  /** Local prefix tokens per candidate id. */
  local?: Record<string, number>;
  cachedTokens?: number;
  ttftS?: number;
  atMs?: number;
  status?: number;
  outcome?: RequestRecord["outcome"];
  /** No plan at all (rejected before planning). */
  unplanned?: boolean;
}

export function finishedRecord(spec: RecordSpec = {}): RequestRecord {
  const local = spec.local ?? {};
  const plan = {
    promptTokens: spec.promptTokens ?? 100,
    tokenSource: "tokenized",
    chunkKeys: [],
    poolPrefixTokens: Math.max(0, ...Object.values(local)),
    candidates: Object.entries(local).map(([id, tokens]) => ({
      id,
      healthy: true,
      localPrefixTokens: tokens,
      waitingPrefillTokens: 0,
      waitingPrefillRequests: 0,
      runningRequests: 0,
    })),
    decision: { ranking: Object.keys(local), scores: [] },
    policy: { name: "cache_aware" },
    inputs: {},
    admission: { admit: true },
    timings: { tokenizeMs: 0, hashMs: 0, lookupMs: 0, scheduleMs: 0 },
  } as unknown as DispatchPlan;
  return {
    requestId: crypto.randomUUID(),
    model: spec.model ?? "m",
    endpoint: "completions",
    arm: spec.arm ?? "default",
    stream: false,
    startedAt: 0,
    startedAtWallMs: spec.atMs ?? 0,
    plan: spec.unplanned ? undefined : plan,
    attempts: spec.instance
      ? [{ instanceId: spec.instance, status: spec.status ?? 200, startedAt: 0 }]
      : [],
    instanceId: spec.instance,
    status: spec.status ?? 200,
    outcome: spec.outcome ?? "ok",
    ttftS: spec.ttftS,
    durationS: spec.ttftS,
    interTokenS: [],
    usage: spec.cachedTokens === undefined ? {} : { cachedTokens: spec.cachedTokens },
  } as RequestRecord;
}

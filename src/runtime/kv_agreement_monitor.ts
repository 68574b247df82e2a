import type { RequestRecord } from "../contracts.ts";
import {
  type AgreementSample,
  type AgreementSnapshot,
  AgreementWindow,
  type KvAgreementState,
  UNKNOWN_AGREEMENT,
} from "../kv/kv_agreement.ts";
import { detectCommand } from "./detect_command.ts";

export interface KvAgreementMonitorOptions {
  model: string;
  /** The router's chunk size: hits are counted in chunks, engines round to blocks. */
  chunkSize: number;
  /** Monotonic milliseconds. */
  now: () => number;
  log: (message: string, fields?: Record<string, unknown>) => void;
  /** The router's config file, for the command its log line suggests. */
  configPath?: string;
}

/** Why a state is what it is, for the log line on each change. */
const LIKELY_CAUSE: Record<KvAgreementState, string> = {
  agree: "the router's predicted hits match the engine's reuse",
  overpredicts: "the router counts hits the engine does not reuse: the store's keys are not " +
    "this engine's (kvHost, key layout), or the engine does not load from the store",
  blind: "the engine keeps reusing long prefixes the router predicted as misses: the seed, " +
    "chunk size or key layout differ from the engine's",
  unknown: "too few requests with engine-reported cached tokens to judge",
};

/**
 * Feeds each finished request of one model into its instance's agreement window and logs every
 * state change with its likely cause and the command that checks the keys.
 */
export class KvAgreementMonitor {
  readonly #options: KvAgreementMonitorOptions;
  readonly #windows = new Map<string, AgreementWindow>();

  constructor(options: KvAgreementMonitorOptions) {
    this.#options = options;
  }

  /** One finished request; ignored when it cannot be compared (see `agreementSampleOf`). */
  observe(record: RequestRecord): void {
    const sample = agreementSampleOf(record, this.#options.chunkSize);
    if (!sample || !record.instanceId) return;
    const window = this.#window(record.instanceId);
    const before = window.state;
    this.#changed(record.instanceId, before, window.observe(sample, this.#options.now()));
  }

  /** Instances whose state is `blind` now (stale evidence is forgotten first). */
  blindInstances(): string[] {
    const now = this.#options.now();
    const blind: string[] = [];
    for (const [instance, window] of this.#windows) {
      const before = window.state;
      if (this.#changed(instance, before, window.refresh(now)) === "blind") blind.push(instance);
    }
    return blind;
  }

  state(instance: string): KvAgreementState {
    return this.#windows.get(instance)?.state ?? "unknown";
  }

  snapshot(instance: string): AgreementSnapshot {
    return this.#windows.get(instance)?.snapshot() ?? { ...UNKNOWN_AGREEMENT };
  }

  /** The instance left the model: its window goes with it. */
  forget(instance: string): void {
    this.#windows.delete(instance);
  }

  #window(instance: string): AgreementWindow {
    let window = this.#windows.get(instance);
    if (!window) {
      window = new AgreementWindow({ toleranceTokens: this.#options.chunkSize });
      this.#windows.set(instance, window);
    }
    return window;
  }

  #changed(instance: string, from: KvAgreementState, to: KvAgreementState): KvAgreementState {
    if (from === to) return to;
    const { model } = this.#options;
    const check = detectCommand(model, this.#options.configPath);
    this.#options.log(
      `KV agreement of ${model} on ${instance}: ${from} -> ${to}: ${LIKELY_CAUSE[to]}` +
        (to === "agree" || to === "unknown" ? "" : `; check the keys with: ${check}`),
      {
        level: to === "agree" || to === "unknown" ? "info" : "warn",
        model,
        instance,
        from,
        to,
        ...this.snapshot(instance),
      },
    );
    return to;
  }
}

/**
 * What a finished request says about agreement, or undefined when it says nothing: it failed,
 * the engine reported no cached tokens, the store did not answer in full (the prediction was
 * partial), the prompt had no keys or was a batch, or it was disaggregated (the decode engine's
 * usage does not describe the prefill instance the prediction was for).
 */
export function agreementSampleOf(
  record: RequestRecord,
  chunkSize: number,
): AgreementSample | undefined {
  const plan = record.plan;
  const reused = record.usage.cachedTokens;
  if (!plan || !record.instanceId || record.prefillInstanceId || plan.decode) return undefined;
  if (record.outcome !== "ok" || reused === undefined) return undefined;
  const answered = plan.lookup?.outcome === "ok" || plan.lookup?.outcome === "mirror";
  if (!answered || plan.keys.length === 0) return undefined;
  if (!plan.tokens || plan.tokens.length !== plan.promptTokens) return undefined;
  const tokens = (chunks: number) => Math.min(plan.promptTokens, chunks * chunkSize);
  return {
    predictedLocalTokens: tokens(plan.hits.localChunks.get(record.instanceId) ?? 0),
    predictedPoolTokens: tokens(plan.hits.poolChunks),
    reusedTokens: reused,
  };
}

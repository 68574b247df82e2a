/**
 * Live agreement between the router's predicted KV hits and the engine's reported reuse
 * (`usage.prompt_tokens_details.cached_tokens`), over a sliding window per instance. Pure: the
 * caller passes every sample and the clock.
 *
 *   agree         the engine reused about what the router predicted;
 *   overpredicts  the router counted hits the engine did not reuse;
 *   blind         the engine keeps reusing long prefixes the router predicted as misses
 *                 (seed, chunk size or key layout differ);
 *   unknown       too few informative samples (or the engine reports no usage): never an alarm.
 */

export const KV_AGREEMENT_STATES = ["unknown", "agree", "overpredicts", "blind"] as const;
export type KvAgreementState = typeof KV_AGREEMENT_STATES[number];

/** One served request: what the router predicted and what the engine said it reused. */
export interface AgreementSample {
  /** Tokens the router predicted cached on the instance that served it. */
  predictedLocalTokens: number;
  /** Tokens the router knew present anywhere in the pool (the engine may load them). */
  predictedPoolTokens: number;
  /** The engine's `cached_tokens`. */
  reusedTokens: number;
}

/** How one sample speaks: both missed (`cold`, no evidence), or agree / over / blind. */
export type SampleVerdict = "cold" | "agree" | "over" | "blind";

export interface AgreementOptions {
  /** Differences up to this many tokens agree (engine block rounding): the router's chunk size. */
  toleranceTokens: number;
  /** A reuse the router missed counts as blind from this many tokens (default 2 × tolerance). */
  blindMinTokens?: number;
  /** Informative samples kept (default 20). */
  windowSize?: number;
  /** Informative samples needed for any verdict but `unknown` (default 5). */
  minSamples?: number;
  /** Samples older than this are forgotten (default 15 minutes). */
  maxAgeMs?: number;
  /** Share of the window that enters `blind` / `overpredicts` (default 0.5). */
  enterShare?: number;
  /** Share below which it is left again (default 0.25: no flapping at the edge). */
  leaveShare?: number;
}

export function judgeSample(sample: AgreementSample, options: AgreementOptions): SampleVerdict {
  const tolerance = options.toleranceTokens;
  const blindMin = options.blindMinTokens ?? 2 * tolerance;
  const known = Math.max(sample.predictedLocalTokens, sample.predictedPoolTokens);
  const reused = sample.reusedTokens;
  if (sample.predictedLocalTokens - reused > tolerance) return "over";
  if (reused - known > tolerance && reused >= blindMin) return "blind";
  if (known === 0 && reused <= tolerance) return "cold";
  return "agree";
}

/** What one instance's window holds right now. */
export interface AgreementSnapshot {
  state: KvAgreementState;
  /** Informative samples in the window, and how many of them agree / over / blind. */
  samples: number;
  agree: number;
  over: number;
  blind: number;
}

interface Judged {
  verdict: Exclude<SampleVerdict, "cold">;
  atMs: number;
}

/** The sliding window of one (model, instance) and its current state. */
export class AgreementWindow {
  readonly #options: AgreementOptions;
  #judged: Judged[] = [];
  #state: KvAgreementState = "unknown";

  constructor(options: AgreementOptions) {
    this.#options = options;
  }

  get state(): KvAgreementState {
    return this.#state;
  }

  /** Adds a sample; returns the state after it. Cold samples carry no evidence and are skipped. */
  observe(sample: AgreementSample, nowMs: number): KvAgreementState {
    const verdict = judgeSample(sample, this.#options);
    if (verdict !== "cold") {
      this.#judged.push({ verdict, atMs: nowMs });
      const size = this.#options.windowSize ?? 20;
      if (this.#judged.length > size) this.#judged.splice(0, this.#judged.length - size);
    }
    return this.refresh(nowMs);
  }

  /** Forgets samples past their age and reclassifies (also when no request came). */
  refresh(nowMs: number): KvAgreementState {
    const maxAge = this.#options.maxAgeMs ?? 15 * 60_000;
    this.#judged = this.#judged.filter((j) => nowMs - j.atMs <= maxAge);
    this.#state = classify(this.#counts(), this.#state, this.#options);
    return this.#state;
  }

  snapshot(): AgreementSnapshot {
    return { state: this.#state, ...this.#counts() };
  }

  #counts(): Omit<AgreementSnapshot, "state"> {
    const count = (verdict: Judged["verdict"]) =>
      this.#judged.filter((j) => j.verdict === verdict).length;
    return {
      samples: this.#judged.length,
      agree: count("agree"),
      over: count("over"),
      blind: count("blind"),
    };
  }
}

/** An instance with nothing judged yet. */
export const UNKNOWN_AGREEMENT: Readonly<AgreementSnapshot> = {
  state: "unknown",
  samples: 0,
  agree: 0,
  over: 0,
  blind: 0,
};

/** The state a window's counts call for, with hysteresis around the current one. */
function classify(
  counts: Omit<AgreementSnapshot, "state">,
  current: KvAgreementState,
  options: AgreementOptions,
): KvAgreementState {
  if (counts.samples < (options.minSamples ?? 5)) return "unknown";
  const enter = options.enterShare ?? 0.5;
  const leave = options.leaveShare ?? 0.25;
  const share = (n: number) => n / counts.samples;
  const holds = (state: KvAgreementState, n: number) =>
    share(n) >= (current === state ? leave : enter);
  if (holds("blind", counts.blind)) return "blind";
  if (holds("overpredicts", counts.over)) return "overpredicts";
  return "agree";
}

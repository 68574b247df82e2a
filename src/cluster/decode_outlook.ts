import type { DecodeLoadForecast } from "../scheduling/pd_admission.ts";

/** A request expected on a decode instance once its prefill ends. */
interface Joiner {
  endsAt: number;
  leasedAsDecode: boolean;
  sequences: number;
}

/**
 * What the router expects of its decode instances (prefill/decode disaggregation): the requests
 * prefilling now that will join each one, and how long a decode lasts (learned from streamed
 * requests, starting from a configured guess). The inputs of prediction-based early rejection.
 */
export class DecodeOutlook {
  readonly #joining = new Map<string, Set<Joiner>>();
  readonly #now: () => number;
  #meanDecodeS: number;

  constructor(options: { meanDecodeS: number; now: () => number }) {
    this.#meanDecodeS = options.meanDecodeS;
    this.#now = options.now;
  }

  get meanDecodeS(): number {
    return this.#meanDecodeS;
  }

  /**
   * A request will join `decodeId` when its prefill ends; the returned call withdraws it.
   * `leasedAsDecode`: its lease already counts it as decoding there (a remote prefill's decode
   * slot, the default); a local prefill's lease counts it as prefilling until its first token.
   * `sequences`: what it decodes (a batch's prompts × `n`; default 1), as its lease counts it.
   */
  expect(
    decodeId: string,
    prefillEndsAt: number,
    options: { leasedAsDecode?: boolean; sequences?: number } = {},
  ): () => void {
    const entry: Joiner = {
      endsAt: prefillEndsAt,
      leasedAsDecode: options.leasedAsDecode ?? true,
      sequences: Math.max(1, options.sequences ?? 1),
    };
    let joining = this.#joining.get(decodeId);
    if (!joining) this.#joining.set(decodeId, joining = new Set());
    joining.add(entry);
    return () => {
      joining.delete(entry);
      if (joining.size === 0 && this.#joining.get(decodeId) === joining) {
        this.#joining.delete(decodeId);
      }
    };
  }

  /**
   * The forecast of `decodeId`, whose reconciled load counts `runningRequests`. The router's own
   * decode leases are taken at decision time, so the requests still prefilling for it elsewhere
   * are in that count already: they are moved from "running now" to "joining". Its own local
   * prefills are not in it: they only join.
   */
  forecast(decodeId: string, runningRequests: number): DecodeLoadForecast {
    const now = this.#now();
    const entries = [...this.#joining.get(decodeId) ?? []];
    // Per sequence, as the running count is.
    const joiningInS = entries.flatMap((e) =>
      Array<number>(e.sequences).fill(Math.max(0, (e.endsAt - now) / 1000))
    );
    return {
      runningNow: Math.max(0, runningRequests - this.leasedJoiners(decodeId)),
      joiningInS,
      meanDecodeS: this.#meanDecodeS,
    };
  }

  /**
   * Sequences of decode leases on `decodeId` whose request has not arrived there yet (prefilling
   * elsewhere).
   */
  leasedJoiners(decodeId: string): number {
    let n = 0;
    for (const entry of this.#joining.get(decodeId) ?? []) {
      if (entry.leasedAsDecode) n += entry.sequences;
    }
    return n;
  }

  /** A measured decode duration (first token to last), folded in with a slow moving average. */
  observeDecode(seconds: number): void {
    if (!(seconds >= 0) || !Number.isFinite(seconds)) return;
    this.#meanDecodeS += 0.1 * (seconds - this.#meanDecodeS);
  }
}

import type { PrefillModelCoefficients } from "./types.ts";

/**
 * Prefill time `T(n_new, n_cached)` in seconds, token counts in thousands:
 *
 *   T = a·n_new + b·n_new·(n_new + 2·n_cached) + r·n_cached + c
 *
 * Why this form (docs/compat.md §8 reference points, LLaMA3-70B on 8×A800):
 * - Without cache it is the paper fit `0.1157·n + 0.000775·n²` (128k tokens → 27.5 s).
 * - The new tokens' causal attention still runs over the cached context: the attention pairs of
 *   n_new tokens after n_cached are n_new·(n_new + 2·n_cached)/2, i.e. b·(total² − cached²).
 *   That alone gives 1.98 s for 128k tokens with 95% cached, 14% below the reference 2.3 s.
 * - Dropping the cached-context attention (new tokens priced as a fresh prompt) gives 0.77 s;
 *   pricing the whole prompt gives 27.5 s. Neither fits.
 * - The remaining 0.32 s is linear in the cached tokens: loading the reused KV into the GPUs.
 *   r = 0.00264 s per thousand cached tokens (2.6 µs/token, 320 KB/token at ~124 GB/s, about
 *   eight PCIe links) puts the 95%-cached point at 2.30 s. This is the default.
 */
export const MOONCAKE_PREFILL_MODEL: Readonly<Required<PrefillModelCoefficients>> = Object.freeze({
  linear: 0.1157,
  quadratic: 0.000775,
  cachedLinear: 0.00264,
  constant: 0,
});

/** Predicted prefill seconds for `newTokens` uncached tokens after `cachedTokens` reused ones. */
export function prefillTimeS(
  model: PrefillModelCoefficients,
  newTokens: number,
  cachedTokens = 0,
): number {
  const n = Math.max(0, newTokens) / 1000;
  const cached = Math.max(0, cachedTokens) / 1000;
  return model.linear * n + model.quadratic * n * (n + 2 * cached) +
    (model.cachedLinear ?? 0) * cached + (model.constant ?? 0);
}

/** One measured prefill: the TTFT minus the queue and transfer time, with its token split. */
export interface PrefillSample {
  newTokens: number;
  cachedTokens: number;
  /** Seconds the prefill itself took. */
  seconds: number;
}

export interface PrefillFitOptions {
  /** Below this many samples the prior is returned unchanged (default 8). */
  minSamples?: number;
  /** Bounds of the learned scale on the prior (default 0.25 .. 4). */
  minScale?: number;
  maxScale?: number;
  /** Upper bound of the learned fixed overhead per request in seconds (default 2). */
  maxConstantS?: number;
  /** Huber IRLS iterations (default 12). */
  iterations?: number;
}

export interface PrefillFit {
  model: PrefillModelCoefficients;
  /** The multiplier applied to the prior's token terms. */
  scale: number;
  /** Seconds added per request. */
  constantS: number;
  samples: number;
}

/**
 * Refines a prior from measured samples: `seconds ≈ scale·prior(sample) + constant`, fitted by
 * Huber-weighted least squares (IRLS, MAD-scaled), then clamped. Two parameters instead of four
 * because measured TTFTs are noisy and cover a narrow range of shapes: the prior keeps the
 * physics (quadratic attention), the samples say how fast this instance really is and what it
 * pays per request. Pure and deterministic: same samples, same model.
 */
export function fitPrefillModel(
  prior: PrefillModelCoefficients,
  samples: readonly PrefillSample[],
  options: PrefillFitOptions = {},
): PrefillFit {
  const minSamples = options.minSamples ?? 8;
  const minScale = options.minScale ?? 0.25;
  const maxScale = options.maxScale ?? 4;
  const maxConstant = options.maxConstantS ?? 2;
  const iterations = options.iterations ?? 12;

  const xs: number[] = [];
  const ys: number[] = [];
  for (const sample of samples) {
    const x = prefillTimeS(prior, sample.newTokens, sample.cachedTokens);
    if (!Number.isFinite(sample.seconds) || sample.seconds < 0 || !(x > 0)) continue;
    xs.push(x);
    ys.push(sample.seconds);
  }
  if (xs.length < minSamples) {
    return { model: { ...prior }, scale: 1, constantS: 0, samples: xs.length };
  }

  const weights = xs.map(() => 1);
  let [scale, constant] = weightedFit(xs, ys, weights, maxConstant);
  for (let iteration = 0; iteration < iterations; iteration++) {
    const residuals = xs.map((x, i) => ys[i] - (scale * x + constant));
    // Residual spread from the median absolute deviation, so outliers do not set their own bar.
    const spread = Math.max(1.4826 * median(residuals.map(Math.abs)), 1e-3);
    const delta = 1.345 * spread;
    for (let i = 0; i < xs.length; i++) {
      const r = Math.abs(residuals[i]);
      weights[i] = r <= delta ? 1 : delta / r;
    }
    [scale, constant] = weightedFit(xs, ys, weights, maxConstant);
  }
  scale = clamp(scale, minScale, maxScale);
  constant = clamp(constant, 0, maxConstant);
  return {
    model: {
      linear: prior.linear * scale,
      quadratic: prior.quadratic * scale,
      cachedLinear: (prior.cachedLinear ?? 0) * scale,
      constant: (prior.constant ?? 0) * scale + constant,
    },
    scale,
    constantS: constant,
    samples: xs.length,
  };
}

export interface PrefillModelEstimatorOptions extends PrefillFitOptions {
  /** Most recent samples kept (default 64): old behaviour ages out, memory stays bounded. */
  window?: number;
}

/**
 * Per-instance online refinement: a bounded window of recent samples and a cached fit.
 * No clocks: callers feed samples in the order they happened.
 */
export class PrefillModelEstimator {
  readonly #prior: PrefillModelCoefficients;
  readonly #options: PrefillModelEstimatorOptions;
  readonly #window: number;
  readonly #samples: PrefillSample[] = [];
  #next = 0;
  #fit: PrefillFit | undefined;

  constructor(prior: PrefillModelCoefficients, options: PrefillModelEstimatorOptions = {}) {
    this.#prior = { ...prior };
    this.#options = options;
    this.#window = Math.max(1, Math.floor(options.window ?? 64));
  }

  get sampleCount(): number {
    return this.#samples.length;
  }

  observe(sample: PrefillSample): void {
    if (!Number.isFinite(sample.seconds) || sample.seconds < 0) return;
    const copy = { ...sample };
    if (this.#samples.length < this.#window) this.#samples.push(copy);
    else this.#samples[this.#next] = copy;
    this.#next = (this.#next + 1) % this.#window;
    this.#fit = undefined;
  }

  fit(): PrefillFit {
    this.#fit ??= fitPrefillModel(this.#prior, this.#samples, this.#options);
    return this.#fit;
  }

  model(): PrefillModelCoefficients {
    return this.fit().model;
  }
}

/** Weighted least squares of y = s·x + c; c is clamped to [0, maxConstant], then s refitted. */
function weightedFit(
  xs: readonly number[],
  ys: readonly number[],
  weights: readonly number[],
  maxConstant: number,
): [number, number] {
  let sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (let i = 0; i < xs.length; i++) {
    const w = weights[i];
    sw += w;
    sx += w * xs[i];
    sy += w * ys[i];
    sxx += w * xs[i] * xs[i];
    sxy += w * xs[i] * ys[i];
  }
  const det = sw * sxx - sx * sx;
  // All samples of one shape cannot separate scale from overhead: attribute it all to scale.
  const free = det > 1e-9 * sw * sxx ? (sy - ((sw * sxy - sx * sy) / det) * sx) / sw : 0;
  const constant = clamp(free, 0, maxConstant);
  const scale = sxx > 0 ? (sxy - constant * sx) / sxx : 1;
  return [scale, constant];
}

function median(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function clamp(value: number, low: number, high: number): number {
  return Math.min(high, Math.max(low, value));
}

/**
 * The simulator's priority bands and tenants: each request of a trace gets a band (its `priority`,
 * lower first, as the router's flow-control queue orders them) and a tenant, drawn from their own
 * seed so that the policies' random draws, and so every existing result, stay as they were.
 */
import { seededRandom } from "./rng.ts";

export interface BandSpec {
  /** Share of requests per band: `shares[b]` of them get priority `b` (normalised to sum 1). */
  shares: readonly number[];
  /** Tenants, equally likely and equally weighted, inside every band. */
  tenants: number;
  /** Given bands per request instead of drawn ones (tests; a trace that carries them). */
  priorities?: readonly number[];
  /** Given tenants per request instead of drawn ones (`leavingOut`). */
  tenantOf?: readonly number[];
}

/** 20% interactive (band 0), 80% batch (band 1), four tenants. */
export const DEFAULT_BANDS: BandSpec = { shares: [0.2, 0.8], tenants: 4 };

export interface BandAssignment {
  band: Int32Array;
  tenant: Int32Array;
}

/** A band and a tenant per request, the same for the same `n`, spec and seed. */
export function assignBands(n: number, spec: BandSpec, seed: number): BandAssignment {
  const random = seededRandom(seed ^ 0xba4d);
  const total = spec.shares.reduce((a, b) => a + b, 0);
  const band = new Int32Array(n);
  const tenant = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const drawn = pickBand(spec.shares, random() * total);
    band[i] = spec.priorities?.[i] ?? drawn;
    const drawnTenant = Math.min(spec.tenants - 1, Math.floor(random() * spec.tenants));
    tenant[i] = spec.tenantOf?.[i] ?? drawnTenant;
  }
  return { band, tenant };
}

/**
 * The spec for a trace of `n` requests with request `index` left out (`--drop`): every other
 * request keeps the band and tenant it had, instead of each later one taking its predecessor's.
 */
export function leavingOut(spec: BandSpec, n: number, seed: number, index: number): BandSpec {
  const { band, tenant } = assignBands(n, spec, seed);
  const others = (values: Int32Array) => Array.from(values).filter((_, i) => i !== index);
  return { ...spec, priorities: others(band), tenantOf: others(tenant) };
}

function pickBand(shares: readonly number[], u: number): number {
  let sum = 0;
  for (let b = 0; b < shares.length; b++) {
    sum += shares[b];
    if (u < sum) return b;
  }
  return shares.length - 1;
}

/** `--bands 0.2,0.8`: positive shares, one per band. */
export function parseBandShares(text: string): number[] {
  const shares = text.split(",").map(Number);
  if (shares.length === 0 || shares.some((s) => !(Number.isFinite(s) && s > 0))) {
    throw new Error(`--bands must be positive shares like 0.2,0.8 (got "${text}")`);
  }
  return shares;
}

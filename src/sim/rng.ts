/** A small seeded PRNG (mulberry32): uniform [0, 1), the same sequence for the same seed. */
export function seededRandom(seed: number): () => number {
  return mulberry32((Math.floor(seed) >>> 0) ^ 0x9e3779b9);
}

/** Plain mulberry32 from a 32-bit state, unmixed (the generator behind `seededRandom`). */
export function mulberry32(state: number): () => number {
  let a = state >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

import { type ChainHasher, chunkCount } from "./chain_hasher.ts";
import { xxh64Hasher } from "./xxhash_wasm.ts";

const TWO_32 = 0x100000000;

/**
 * Llumnix `xxhash` (v6d backend): XXH64 with seed 0 over the whole prefix, each token an int64
 * little-endian, never reset, so chunk i's hash covers tokens [0, (i+1)·chunkSize). An unfull
 * last chunk is zero-padded to a full chunk. The state is saved at each chunk boundary and
 * restored after the digest instead of re-hashing the prefix.
 */
export function createXxh64CumulativeChain(
  chunkSize: number,
  saveUnfullChunk: boolean,
): ChainHasher {
  const buf = new Uint8Array(8 * chunkSize);
  const view = new DataView(buf.buffer);

  function digests(tokens: ArrayLike<number>): Uint8Array[] {
    const n = chunkCount(tokens.length, chunkSize, saveUnfullChunk);
    const out: Uint8Array[] = new Array(n);
    if (n === 0) return out;
    const hasher = xxh64Hasher();
    hasher.init();
    for (let i = 0; i < n; i++) {
      const start = i * chunkSize;
      const end = Math.min(start + chunkSize, tokens.length);
      let p = 0;
      for (let k = start; k < end; k++, p += 8) {
        const t = tokens[k];
        if ((t >>> 0) === t) {
          view.setUint32(p, t, true);
          view.setUint32(p + 4, 0, true);
        } else {
          if (!Number.isSafeInteger(t)) {
            throw new TypeError(`Token at index ${k} is ${t}: token ids must be integers`);
          }
          const hi = Math.floor(t / TWO_32); // two's complement split, also for negatives
          view.setUint32(p, t - hi * TWO_32, true);
          view.setUint32(p + 4, hi >>> 0, true);
        }
      }
      buf.fill(0, p); // zero-pad an unfull chunk
      hasher.update(buf);
      if (i < n - 1) {
        const state = hasher.save();
        out[i] = hasher.digest("binary");
        hasher.load(state);
      } else {
        out[i] = hasher.digest("binary");
      }
    }
    return out;
  }

  return {
    hash: "xxh64_cumulative",
    digests: (tokens) => digests(tokens),
    // The canonical XXH64 digest is big-endian; Llumnix prints the uint64 in decimal.
    strings: (tokens) => digests(tokens).map((d) => decimalU64(d)),
  };
}

function decimalU64(d: Uint8Array): string {
  const hi = ((d[0] << 24) | (d[1] << 16) | (d[2] << 8) | d[3]) >>> 0;
  const lo = ((d[4] << 24) | (d[5] << 16) | (d[6] << 8) | d[7]) >>> 0;
  return ((BigInt(hi) << 32n) | BigInt(lo)).toString();
}

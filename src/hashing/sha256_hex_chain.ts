import { type ChainHasher, chunkCount } from "./chain_hasher.ts";
import { hexToBytes, hexToBytesInto } from "./hex.ts";
import { sha256Hex } from "./sha256_digest.ts";

/**
 * SGLang HiCache `get_hash_str` (also Llumnix `sha256_hex`): chunk i hashes the previous
 * chunk's 32 raw digest bytes followed by each token as uint32 little-endian; chunk 0 has no
 * previous bytes and there is no seed. One buffer holds `prev ‖ tokens`, and each digest is
 * decoded straight into its head for the next chunk.
 */
export function createSha256HexChain(chunkSize: number, saveUnfullChunk: boolean): ChainHasher {
  const buf = new Uint8Array(32 + 4 * chunkSize);

  function strings(tokens: ArrayLike<number>): string[] {
    const n = chunkCount(tokens.length, chunkSize, saveUnfullChunk);
    const out: string[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const start = i * chunkSize;
      const end = Math.min(start + chunkSize, tokens.length);
      let p = 32;
      for (let k = start; k < end; k++) {
        const t = tokens[k];
        if ((t >>> 0) !== t) {
          throw new TypeError(
            `Token at index ${k} is ${t}: sha256_hex hashes token ids as uint32 (0..2^32-1)`,
          );
        }
        buf[p++] = t;
        buf[p++] = t >> 8;
        buf[p++] = t >> 16;
        buf[p++] = t >>> 24;
      }
      const hex = sha256Hex(buf.subarray(i === 0 ? 32 : 0, p));
      hexToBytesInto(hex, buf, 0);
      out[i] = hex;
    }
    return out;
  }

  return {
    hash: "sha256_hex",
    strings: (tokens) => strings(tokens),
    digests: (tokens) => strings(tokens).map(hexToBytes),
  };
}

/**
 * Chain-hash throughput: `deno task bench:hash` (prints a Markdown report).
 *
 * For each algorithm: tokens/s hashing an 8k- and a 128k-token prompt in 256-token chunks (a new
 * prompt each call: its first token changes, so the chain's memo of known blocks never hits). For
 * the SHA-256 family also the rate over the bytes actually hashed, as a share of
 * `openssl speed -evp sha256 -bytes 1024` measured in the same run, and for sha256_cbor the
 * speed-up over the naive reference (cbor-x encode + node:crypto createHash per chunk), and the
 * memo's gain and cost (src/hashing/chain_memo.ts) against the same chain without it, and the
 * hex conversion of a digest by Uint8Array's native methods against the tables (src/hashing/hex.ts).
 * The machine is shared: every figure is the best of several timed rounds, and ratios are
 * taken against references measured in this same run. `--quick` shortens the rounds.
 */
import { createHash, hash as oneShotHash } from "node:crypto";
import { createSHA256 } from "hash-wasm";
import { Encoder } from "cbor-x";
import { CborChainEncoder, cborText } from "../../src/hashing/cbor_chain_encoder.ts";
import { PickleChainEncoder } from "../../src/hashing/pickle_chain_encoder.ts";
import {
  bytesToHex,
  bytesToHexByTable,
  hexToBytesInto,
  hexToBytesIntoByTable,
} from "../../src/hashing/hex.ts";
import { createVllmChain } from "../../src/hashing/vllm_chain.ts";
import { createKeyScheme, HASH_ALGORITHMS } from "../../src/hashing/key_scheme.ts";
import type { HashAlgorithm } from "../../src/hashing/types.ts";
import { mulberry32 } from "../../src/sim/rng.ts";

const USAGE = `Usage: deno task bench:hash [--quick]

Chain-hash throughput of every algorithm on an 8k- and a 128k-token prompt (chunk 256), against
openssl's SHA-256 measured in the same run; prints a Markdown report. --quick: shorter rounds.`;

if (Deno.args.includes("--help") || Deno.args.includes("-h")) {
  console.log(USAGE);
  Deno.exit(0);
}
const unknown = Deno.args.filter((a) => a !== "--quick");
if (unknown.length) {
  console.error(`Unknown argument ${unknown[0]}\n\n${USAGE}`);
  Deno.exit(2);
}

const CHUNK = 256;
const QUICK = Deno.args.includes("--quick");
/**
 * Every seeded chain roots at "0", as the naive reference does: unseeded, sha256 would root at
 * vLLM's "vllm-none-hash" and xxhash is refused (vLLM has no default root for it). The seed's
 * value does not change the speed; unseeded chains ignore it.
 */
const SEED = "0";
const ROUNDS = QUICK ? 3 : 7;
const ROUND_MS = QUICK ? 80 : 250;

/** Deterministic Qwen3-range token ids. */
function prompt(n: number, seed: number): number[] {
  const random = mulberry32(seed);
  return Array.from({ length: n }, () => Math.floor(random() * 151936));
}

/** Best seconds per call over ROUNDS rounds of about ROUND_MS each (after a warm-up round). */
function time(fn: () => unknown): number {
  let calls = 1;
  for (;;) {
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) fn();
    if (performance.now() - t0 >= ROUND_MS / 4) break;
    calls *= 2;
  }
  calls = Math.max(1, Math.round(calls * 4));
  let best = Infinity;
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) fn();
    best = Math.min(best, (performance.now() - t0) / 1000 / calls);
  }
  return best;
}

/** `hash(tokens)` on a new prompt each call: the token at `at` takes a value not used before. */
function changingAt<T>(tokens: number[], at: number, hash: (tokens: number[]) => T): () => T {
  let next = 0;
  return () => {
    tokens[at] = next++ % 151936;
    return hash(tokens);
  };
}

/** Bytes the chain feeds to SHA-256 for this prompt (the encoded blocks, root excluded). */
function hashedBytes(hash: HashAlgorithm, tokens: number[]): number {
  const n = Math.floor(tokens.length / CHUNK);
  if (hash === "sha256_hex") return n * (32 + 4 * CHUNK) - 32;
  const encoder = hash === "sha256_cbor" ? new CborChainEncoder(32) : new PickleChainEncoder(32);
  let total = 0;
  for (let i = 0; i < n; i++) {
    total += encoder.encodeBlock(tokens, i * CHUNK, (i + 1) * CHUNK, null).length;
  }
  return total;
}

/** The obvious implementation: cbor-x encode + node:crypto createHash per chunk. */
function naiveSha256Cbor(tokens: number[]): string[] {
  const encoder = new Encoder({ useRecords: false, tagUint8Array: false });
  let parent: Uint8Array = createHash("sha256").update(encoder.encode(SEED)).digest();
  const out: string[] = [];
  for (let s = 0; s + CHUNK <= tokens.length; s += CHUNK) {
    const digest = createHash("sha256").update(
      encoder.encode([parent, tokens.slice(s, s + CHUNK), null]),
    ).digest();
    out.push(digest.toString("hex"));
    parent = digest;
  }
  return out;
}

async function opensslSha256(): Promise<{ bytesPerSec: number } | { skipped: string }> {
  try {
    const out = await new Deno.Command("openssl", {
      args: ["speed", "-evp", "sha256", "-bytes", "1024", "-seconds", QUICK ? "1" : "2"],
      stdout: "piped",
      stderr: "null",
    }).output();
    const line = new TextDecoder().decode(out.stdout).trim().split("\n").pop() ?? "";
    const m = line.match(/sha256\s+([\d.]+)k/i);
    if (!out.success || !m) {
      return { skipped: `could not parse openssl output: ${JSON.stringify(line)}` };
    }
    return { bytesPerSec: Number(m[1]) * 1000 };
  } catch (e) {
    return { skipped: e instanceof Deno.errors.NotFound ? "openssl is not installed" : String(e) };
  }
}

const fmt = (x: number, digits = 2) =>
  x >= 1e9
    ? `${(x / 1e9).toFixed(digits)} G`
    : x >= 1e6
    ? `${(x / 1e6).toFixed(digits)} M`
    : `${(x / 1e3).toFixed(digits)} k`;

const prompts = [
  { label: "8k", tokens: prompt(8192, 1) },
  { label: "128k", tokens: prompt(131072, 2) },
];

const openssl = await opensslSha256();
const lines: string[] = [];
lines.push(
  `## Chain hashing, chunk ${CHUNK} (Deno ${Deno.version.deno}, best of ${ROUNDS} rounds)`,
  "",
);
lines.push(
  "openssl speed -evp sha256 -bytes 1024: " +
    ("bytesPerSec" in openssl ? `${fmt(openssl.bytesPerSec)}B/s` : `skipped (${openssl.skipped})`),
  "",
);
lines.push("| algorithm | prompt | tokens/s | µs/chunk | hashed bytes/s | % of openssl SHA-256 |");
lines.push("|---|---|---:|---:|---:|---:|");
const results = new Map<string, number>();
for (const hash of HASH_ALGORITHMS) {
  const scheme = createKeyScheme({ hash, seed: SEED, chunkSize: CHUNK, keyFormat: "{hex}" });
  for (const { label, tokens } of prompts) {
    const seconds = time(changingAt(tokens, 0, (t) => scheme.blockHashes(t)));
    results.set(`${hash}/${label}`, seconds);
    const chunks = Math.floor(tokens.length / CHUNK);
    let bytesCol = "";
    let pctCol = "";
    if (hash.startsWith("sha256")) {
      const rate = hashedBytes(hash, tokens) / seconds;
      bytesCol = `${fmt(rate)}B/s`;
      if ("bytesPerSec" in openssl) pctCol = `${((100 * rate) / openssl.bytesPerSec).toFixed(1)}%`;
    }
    lines.push(
      `| ${hash} | ${label} | ${fmt(tokens.length / seconds)} | ${
        (seconds / chunks * 1e6).toFixed(2)
      } | ${bytesCol} | ${pctCol} |`,
    );
  }
}

lines.push("", "### sha256_cbor against the naive reference (cbor-x + createHash per chunk)", "");
lines.push("| prompt | naive tokens/s | naive % of openssl | tidegate tokens/s | speed-up |");
lines.push("|---|---:|---:|---:|---:|");
const fast = createKeyScheme({
  hash: "sha256_cbor",
  seed: SEED,
  chunkSize: CHUNK,
  keyFormat: "{hex}",
});
for (const { label, tokens } of prompts) {
  if (naiveSha256Cbor(tokens).join() !== fast.blockHashes(tokens).join()) {
    throw new Error(
      "naive reference and tidegate disagree: the benchmark compares different things",
    );
  }
  const naive = time(changingAt(tokens, 0, naiveSha256Cbor));
  const ours = results.get(`sha256_cbor/${label}`)!;
  const pct = "bytesPerSec" in openssl
    ? `${((100 * hashedBytes("sha256_cbor", tokens)) / naive / openssl.bytesPerSec).toFixed(1)}%`
    : "";
  lines.push(
    `| ${label} | ${fmt(tokens.length / naive)} | ${pct} | ${fmt(tokens.length / ours)} | ${
      (naive / ours).toFixed(1)
    }x |`,
  );
}

// The memo of known blocks: a new prompt (every block missed and remembered) and a prompt whose
// first 7/8 was hashed before (a conversation grown by a turn), against the chain without it.
lines.push("", "### sha256_cbor with and without the memo of known blocks (8k prompt)", "");
lines.push("| prompt | without memo µs | with memo µs | with ÷ without |");
lines.push("|---|---:|---:|---:|");
{
  const tokens = prompts[0].tokens;
  const withMemo = createVllmChain("sha256_cbor", SEED, CHUNK, false, "tagged");
  const without = createVllmChain("sha256_cbor", SEED, CHUNK, false, "tagged", null);
  if (withMemo.strings(tokens).join() !== without.strings(tokens).join()) {
    throw new Error("the chain with its memo and without disagree");
  }
  const cases: [string, number][] = [
    ["new each call", 0],
    ["last 1/8 new each call", tokens.length - tokens.length / 8],
  ];
  for (const [label, at] of cases) {
    const off = time(changingAt(tokens, at, (t) => without.strings(t)));
    const on = time(changingAt(tokens, at, (t) => withMemo.strings(t)));
    lines.push(
      `| ${label} | ${(off * 1e6).toFixed(1)} | ${(on * 1e6).toFixed(1)} | ${
        (on / off).toFixed(2)
      }× |`,
    );
  }
}

// A chain converts each digest between hex and bytes: natively where the runtime can, by table
// otherwise (src/hashing/hex.ts).
lines.push("", "### Hex conversion of a 32-byte digest, 1,000 digests", "");
lines.push("| conversion | table ns | native ns | native ÷ table |");
lines.push("|---|---:|---:|---:|");
{
  const random = mulberry32(3);
  const digests = Array.from(
    { length: 1000 },
    () => Uint8Array.from({ length: 32 }, () => Math.floor(random() * 256)),
  );
  const hexes = digests.map(bytesToHexByTable);
  const out = new Uint8Array(32);
  const pairs: [string, () => unknown, () => unknown][] = [
    [
      "bytes → hex",
      () => digests.forEach(bytesToHexByTable),
      () => digests.forEach(bytesToHex),
    ],
    [
      "hex → bytes, into a buffer",
      () => hexes.forEach((hex) => hexToBytesIntoByTable(hex, out)),
      () => hexes.forEach((hex) => hexToBytesInto(hex, out)),
    ],
  ];
  for (const [label, table, native] of pairs) {
    const [t, n] = [time(table), time(native)];
    lines.push(
      `| ${label} | ${(t * 1e6).toFixed(0)} | ${(n * 1e6).toFixed(0)} | ${(n / t).toFixed(2)}× |`,
    );
  }
}

// Why sha256Hex uses crypto.hash(..., "hex"): the digest call alone on pre-encoded CBOR chunks.
lines.push("", "### SHA-256 call alone on the 8k prompt's pre-encoded CBOR chunks", "");
lines.push("| digest call | µs/chunk | bytes/s | % of openssl |");
lines.push("|---|---:|---:|---:|");
{
  const tokens = prompts[0].tokens;
  const encoder = new CborChainEncoder(32);
  const blocks: Uint8Array[] = [];
  for (let s = 0; s + CHUNK <= tokens.length; s += CHUNK) {
    blocks.push(encoder.encodeBlock(tokens, s, s + CHUNK, null).slice());
  }
  const bytes = blocks.reduce((n, b) => n + b.length, 0);
  const wasm = await createSHA256();
  const variants: [string, (b: Uint8Array) => unknown][] = [
    ['crypto.hash("sha256", b, "hex")', (b) => oneShotHash("sha256", b, "hex")],
    ['crypto.hash("sha256", b, "buffer")', (b) => oneShotHash("sha256", b, "buffer")],
    ['createHash().update(b).digest("hex")', (b) => createHash("sha256").update(b).digest("hex")],
    ["createHash().update(b).digest()", (b) => createHash("sha256").update(b).digest()],
    ["hash-wasm createSHA256 (sync)", (b) => (wasm.init(), wasm.update(b), wasm.digest("binary"))],
  ];
  for (const [name, digest] of variants) {
    const seconds = time(() => {
      for (const b of blocks) digest(b);
    });
    const rate = bytes / seconds;
    const pct = "bytesPerSec" in openssl
      ? `${((100 * rate) / openssl.bytesPerSec).toFixed(1)}%`
      : "";
    lines.push(
      `| ${name} | ${(seconds / blocks.length * 1e6).toFixed(2)} | ${fmt(rate)}B/s | ${pct} |`,
    );
  }
  lines.push(
    "",
    `CBOR bytes per 256-token chunk here: ${(bytes / blocks.length).toFixed(0)}; root seed ${
      JSON.stringify(SEED)
    } = ${cborText(SEED).length} bytes.`,
  );
}

console.log(lines.join("\n"));

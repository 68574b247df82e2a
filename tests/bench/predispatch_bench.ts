/**
 * Whole pre-dispatch cost for an 8k-token chat: render the chat template, tokenize, chain-hash
 * and build the store keys — what the router does before it asks the store anything.
 * `deno task bench:predispatch` prints p50/p99 per request for:
 *
 * - reference: the exact HF tokenizer with no cache, plus a naive key chain (cbor-x encode +
 *   createHash per chunk, hex keys) — what a straightforward implementation costs;
 * - tidegate cold: the fast path, a new conversation every request (nothing cached);
 * - tidegate multi-turn: a conversation growing by one turn per request (the common case).
 *
 * Ratios are against the reference measured in this same run (the machine is shared).
 */
import { createHash } from "node:crypto";
import { Encoder } from "cbor-x";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import { percentile } from "../../src/sim/summary.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import { benchConversation } from "./bench_text.ts";

const USAGE = `Usage: deno task bench:predispatch [--quick]

Whole pre-dispatch cost (template, tokenize, chain-hash, keys) of an 8k-token chat: p50/p99 per
request for a naive reference, tidegate cold and tidegate multi-turn, measured in the same run.
--quick: 20 rounds instead of 60.`;

if (Deno.args.includes("--help") || Deno.args.includes("-h")) {
  console.log(USAGE);
  Deno.exit(0);
}
const unknownArgs = Deno.args.filter((a) => !["--quick"].includes(a));
if (unknownArgs.length) {
  console.error(`Unknown argument ${unknownArgs[0]}\n\n${USAGE}`);
  Deno.exit(2);
}

const ROUNDS = Deno.args.includes("--quick") ? 20 : 60;
function measure(run: (i: number) => void): { p50: number; p99: number } {
  for (let i = 0; i < 3; i++) run(-1 - i); // warm-up
  const times: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const t0 = performance.now();
    run(i);
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 0.5), p99: percentile(times, 0.99) };
}

const exact = await loadTokenizer("builtin:qwen3", { fastPath: false, cacheMaxTokens: 0 });
const fast = await loadTokenizer("builtin:qwen3", { fastPath: true, cacheMaxTokens: 4_000_000 });
const fastCold = await loadTokenizer("builtin:qwen3", { fastPath: true, cacheMaxTokens: 0 });
const scheme = createKeyScheme({
  hash: "sha256_cbor",
  seed: "0",
  chunkSize: 256,
  keyFormat: "llumnix",
});
const cbor = new Encoder({ useRecords: false, tagUint8Array: false });

function naiveKeys(tokens: number[]): string[] {
  let parent: Uint8Array = createHash("sha256").update(cbor.encode("0")).digest();
  const keys: string[] = [];
  for (let s = 0; s + 256 <= tokens.length; s += 256) {
    const digest = createHash("sha256").update(
      cbor.encode([parent, tokens.slice(s, s + 256), null]),
    ).digest();
    keys.push(`${digest.toString("hex")}_0`);
    parent = digest;
  }
  return keys;
}

const probe = benchConversation(1, 14);
const tokenCount = exact.encodeChat(probe).length;
if (naiveKeys(exact.encodeChat(probe)).join() !== scheme.keys(fast.encodeChat(probe)).join()) {
  throw new Error(
    "reference and tidegate disagree on the keys: the benchmark compares different things",
  );
}

const reference = measure((i) => naiveKeys(exact.encodeChat(benchConversation(1000 + i, 14))));
const cold = measure((i) => scheme.chunkKeys(fastCold.encodeChat(benchConversation(2000 + i, 14))));
// Multi-turn: request i is the conversation so far plus one more turn (what a chat client sends).
const base = benchConversation(7, 40);
const growing = measure((i) => {
  const turns = 14 + ((i + 3) % 26);
  scheme.chunkKeys(fast.encodeChat(base.slice(0, 1 + turns)));
});

const row = (name: string, r: { p50: number; p99: number }) =>
  `| ${name} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${
    (reference.p50 / r.p50).toFixed(1)
  }× |`;
console.log(
  `Pre-dispatch cost (template + tokenize + hash + keys), ~${tokenCount}-token chat, ${ROUNDS} requests each\n`,
);
console.log("| path | p50 ms | p99 ms | speed-up at p50 |");
console.log("|---|---:|---:|---:|");
console.log(row("reference: exact tokenizer, no cache, cbor-x + createHash", reference));
console.log(row("tidegate, new conversation every request (fast path, nothing cached)", cold));
console.log(row("tidegate, conversation growing by one turn (fast path + segment cache)", growing));

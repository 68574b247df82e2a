import { assert, assertEquals, assertThrows } from "../assert.ts";
import { mulberry32 } from "../../src/sim/rng.ts";
import { PieceCache } from "../../src/tokenize/piece_cache.ts";
import { pieceRegex, splitPieces } from "../../src/tokenize/pre_tokenizer_split.ts";
import { SplitPreTokenizer } from "@huggingface/tokenizers";
import { variedCorpus } from "./corpus.ts";
import { packagedDir, type PackagedTokenizer, packagedTokenizer } from "./fixtures.ts";

Deno.test("PieceCache holds at most maxEntries pieces and keeps the recently used ones", () => {
  const cache = new PieceCache({ maxEntries: 8, maxPieceChars: 32 });
  cache.set("kept", Uint32Array.of(7));
  for (let i = 0; i < 100; i++) {
    cache.set(`p${i}`, Uint32Array.of(i, i + 1));
    assert(cache.stats().entries <= 8);
    assertEquals(cache.get("kept"), 7, `after ${i} inserts`); // used all along: never evicted
  }
  assertEquals(cache.get("p0"), undefined);
  assertEquals(cache.get("p99"), Uint32Array.of(99, 100));
  const stats = cache.stats();
  assert(stats.evictions > 0 && stats.hits === 101 && stats.misses === 1, JSON.stringify(stats));
});

Deno.test("PieceCache neither stores nor looks up pieces longer than maxPieceChars", () => {
  const cache = new PieceCache({ maxEntries: 8, maxPieceChars: 4 });
  cache.set("abcde", Uint32Array.of(1));
  cache.set("abcd", Uint32Array.of(2));
  assertEquals(cache.get("abcde"), undefined);
  assertEquals(cache.get("abcd"), 2);
  assertEquals(cache.stats().entries, 1);
  assertEquals(cache.stats().bypassed, 1);
  assertThrows(() => new PieceCache({ maxEntries: 1, maxPieceChars: 4 }), RangeError);
});

Deno.test("splitPieces() keeps every character: matches and the text between them, in order", () => {
  const out: string[] = [];
  assertEquals(splitPieces("ab12cd3", /\d+/gu, out), ["ab", "12", "cd", "3"]);
  assertEquals(splitPieces("", /\d+/gu, out), []);
  // Empty matches give no piece but split there, one code point at a time (as the library does).
  assertEquals(splitPieces("a🙂b", /x*/gu, out), ["a", "🙂", "b"]);
});

Deno.test("splitPieces() gives the library's own Split pieces for every shipped regex", async () => {
  const corpus = variedCorpus(3, 300);
  for (const name of ["qwen3", "llama3_1", "deepseek_v3"] as const) {
    const json = JSON.parse(await Deno.readTextFile(new URL("tokenizer.json", packagedDir(name))));
    for (const step of json.pre_tokenizer.pretokenizers.filter((s: Json) => s.type === "Split")) {
      const library = new SplitPreTokenizer(step);
      const regex = library.pattern!;
      for (const text of corpus) {
        assertEquals(splitPieces(text, regex, []), library.pre_tokenize_text(text), name);
      }
    }
  }
});

Deno.test("pieceRegex() takes the library's regex for Split + ByteLevel and ByteLevel alone only", () => {
  const split = {
    type: "Split",
    pattern: { Regex: "\\p{N}|\\s+" },
    behavior: "Isolated",
    invert: false,
  };
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, use_regex: false };
  const regex = pieceRegex({ type: "Sequence", pretokenizers: [split, byteLevel] });
  assertEquals(splitPieces("ab 12", regex!, []), ["ab", " ", "1", "2"]);
  assert(pieceRegex({ type: "ByteLevel", add_prefix_space: false, use_regex: true }));
  assertEquals(pieceRegex({ type: "ByteLevel", use_regex: false }), undefined);
  assertEquals(pieceRegex({ type: "Metaspace" }), undefined);
  assertEquals(
    pieceRegex({ type: "Sequence", pretokenizers: [split, split, byteLevel] }),
    undefined,
  );
  assertEquals(
    pieceRegex({ type: "Sequence", pretokenizers: [{ ...split, behavior: "Removed" }, byteLevel] }),
    undefined,
  );
});

type Json = Record<string, unknown>;

/** Fragments that stress the pre-tokenizer regexes and the piece cache's reuse of ids. */
const WORDS = ["the", "model", "token", "Hello", "WORLD", "naïve", "café", "Zürich", "x", "I"];
const CONTRACTIONS = ["'s", "'S", "'ll", "'LL", "'ve", "'Re", "'d", "'m", "'t", "’s", "''s", "'"];
const SPACES = [
  " ",
  "  ",
  "\t",
  "\n",
  "\r\n",
  "\n\n",
  "\u00a0",
  "\u3000",
  "\u0085",
  "\ufeff",
  "\u2009",
];
const CJK = ["数学是科学的皇后", "日本語の文章です", "カタカナ", "한국어 문장", "東京", "、", "。"];
const EMOJI = ["🚀", "👩‍👩‍👧‍👦", "🇫🇷", "1️⃣", "👍🏽", "❤️‍🔥", "🙂🙂"];
const MARKS = ["e\u0301", "A\u030a", "\u1e9b\u0323", "ﬁ", "½", "²", "ⅫⅣ", "٣٤٥"];
const PUNCT = [".", ",", "!?", "...", "-->", "={", "});", '"', "#", "$", "%", "**", "©"];

function randomText(rnd: () => number, addedTokens: string[]): string {
  const pick = <T>(items: readonly T[]) => items[Math.floor(rnd() * items.length)];
  const fragments = 5 + Math.floor(rnd() * 50);
  let text = "";
  for (let f = 0; f < fragments; f++) {
    const kind = rnd();
    if (kind < 0.3) text += pick(WORDS) + (rnd() < 0.3 ? pick(CONTRACTIONS) : "");
    else if (kind < 0.45) {
      text += pick(SPACES).repeat(1 + Math.floor(rnd() * (rnd() < 0.9 ? 6 : 40)));
    } else if (kind < 0.55) text += String(Math.floor(rnd() * 10 ** (1 + Math.floor(rnd() * 15))));
    else if (kind < 0.63) text += pick(CJK);
    else if (kind < 0.7) text += pick(EMOJI);
    else if (kind < 0.77) text += pick(MARKS);
    else if (kind < 0.87) text += pick(PUNCT);
    else if (kind < 0.95) {
      const token = pick(addedTokens);
      text += rnd() < 0.8 ? token : token.slice(0, Math.max(1, token.length - 2)); // or nearly
    } else if (kind < 0.98) text += String.fromCodePoint(0x20 + Math.floor(rnd() * 0x2ffff));
    else text += pick([" ", "a", "-", "7", "\n"]).repeat(500 + Math.floor(rnd() * 200)); // long runs
  }
  return text;
}

async function addedTokenTexts(name: PackagedTokenizer): Promise<string[]> {
  const json = JSON.parse(await Deno.readTextFile(new URL("tokenizer.json", packagedDir(name))));
  return (json.added_tokens as { content: string }[]).map((t) => t.content);
}

for (const name of ["qwen3", "llama3_1", "deepseek_v3"] as const) {
  Deno.test(`${name}: the cached path gives the exact path's ids on 300 random texts, also from a small, evicting piece cache`, async () => {
    const exact = await packagedTokenizer(name, { fastPath: false, cacheMaxTokens: 0 });
    const cached = await packagedTokenizer(name, {}); // segment and piece caches, as deployed
    const evicting = await packagedTokenizer(name, { pieceCacheEntries: 32, cacheMaxTokens: 0 });
    const added = await addedTokenTexts(name);
    const rnd = mulberry32(11);
    for (let i = 0; i < 300; i++) {
      const text = randomText(rnd, added);
      const expected = [...exact.encodeSegmentExact(text)];
      const label = `${name} text ${i}: ${JSON.stringify(text.slice(0, 80))}`;
      assertEquals(cached.encode(text, { addSpecialTokens: false }), expected, label);
      assertEquals(cached.encode(text, { addSpecialTokens: false }), expected, `${label} (again)`);
      assertEquals(evicting.encode(text, { addSpecialTokens: false }), expected, label);
    }
    const pieces = evicting.stats().pieceCache;
    if (name === "deepseek_v3") assertEquals(pieces, null); // no fast path: nothing to cache
    else {
      assert(pieces && pieces.hits > 1000 && pieces.evictions > 0, JSON.stringify(pieces));
      assert(pieces.entries <= 32);
    }
  });
}

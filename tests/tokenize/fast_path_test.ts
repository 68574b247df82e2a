import { assert, assertEquals, assertMatch } from "../assert.ts";
import { hasLongRun, LONG_RUN_CHARS } from "../../src/tokenize/fast_bpe_encoder.ts";
import { planFastPath } from "../../src/tokenize/fast_path_plan.ts";
import { createLocalTokenizer } from "../../src/tokenize/local_tokenizer.ts";
import { variedCorpus } from "./corpus.ts";
import { packagedDir, packagedTokenizer, tinyTokenizerJson as tinyTokenizer } from "./fixtures.ts";

const corpus = variedCorpus();

async function tokenizerJson(name: "qwen3" | "llama3_1" | "deepseek_v3") {
  return JSON.parse(await Deno.readTextFile(new URL("tokenizer.json", packagedDir(name))));
}

for (const name of ["qwen3", "llama3_1"] as const) {
  Deno.test(`the fast path gives the exact path's ids for ${name} on a ${corpus.length}-text varied corpus`, async () => {
    const fast = await packagedTokenizer(name, { cacheMaxTokens: 0 });
    const exact = await packagedTokenizer(name, { fastPath: false, cacheMaxTokens: 0 });
    assert(fast.info.fastPath, fast.info.reason);
    let tokens = 0;
    for (const text of corpus) {
      // The reference: the library encoding the whole text (added tokens included).
      const expected = [...exact.encodeSegmentExact(text)];
      const label = `text ${JSON.stringify(text.slice(0, 60))}`;
      assertEquals(fast.encode(text, { addSpecialTokens: false }), expected, label);
      assertEquals(fast.encode(text), [...fast.info.specialTokens!.prefix, ...expected], label);
      tokens += expected.length;
    }
    assert(tokens > 50_000, `corpus too small: ${tokens} tokens`);
    assert(fast.stats().fastSegments > 0 && fast.stats().longRunFallbacks >= 4);
  });

  Deno.test(`segment-by-segment encoding equals the library's whole-text encoding for ${name}`, async () => {
    const exact = await packagedTokenizer(name, { fastPath: false, cacheMaxTokens: 0 });
    for (const text of corpus) {
      const whole = [...exact.encodeSegmentExact(text)];
      assertEquals(exact.encode(text, { addSpecialTokens: false }), whole);
    }
  });

  Deno.test(`planFastPath() accepts ${name} after replaying both BPE procedures on every token`, async () => {
    const decision = planFastPath(await tokenizerJson(name), { verifyEveryToken: true });
    assert(decision.ok, decision.ok ? "" : decision.reason);
    assertEquals(decision.plan.excludedTokens, 0);
  });
}

Deno.test("planFastPath() rejects DeepSeek-V3's three Split pre-tokenizers and the tokenizer says why", async () => {
  const decision = planFastPath(await tokenizerJson("deepseek_v3"));
  assertEquals(decision.ok, false);
  const tokenizer = await packagedTokenizer("deepseek_v3");
  assertEquals(tokenizer.info.fastPath, false);
  assertMatch(tokenizer.info.reason, /\[Split, Split, Split, ByteLevel\]/);
  assertEquals(tokenizer.encode("Hello world"), [0, 19923, 2058]); // BOS from add_bos_token
});

Deno.test("planFastPath() refuses vocabularies where tiktoken would not reproduce Hugging Face", () => {
  const ok = planFastPath(tinyTokenizer([["a", "b"], ["ab", "c"]]));
  assert(ok.ok, ok.ok ? "" : ok.reason);
  const cases: [string, Record<string, unknown>, RegExp][] = [
    [
      "byte fallback",
      { model: { ...tinyTokenizer([]).model, byte_fallback: true } },
      /byte_fallback/,
    ],
    ["unigram", { model: { type: "Unigram", vocab: [] } }, /not BPE/],
    [
      "prefix space",
      { pre_tokenizer: { type: "ByteLevel", add_prefix_space: true } },
      /prefix space/,
    ],
    ["lowercase", { normalizer: { type: "Lowercase" } }, /normalizer/],
    ["metaspace", { pre_tokenizer: { type: "Metaspace" } }, /not Split \+ ByteLevel/],
    ["lstrip", {
      added_tokens: [{
        id: 400,
        content: "<m>",
        lstrip: true,
        rstrip: false,
        single_word: false,
        special: true,
      }],
    }, /strips whitespace/],
  ];
  for (const [label, extra, reason] of cases) {
    const decision = planFastPath(tinyTokenizer([["a", "b"]], extra));
    assertEquals(decision.ok, false, label);
    if (!decision.ok) assertMatch(decision.reason, reason);
  }
  // Merge order must follow token ids.
  const reversed = tinyTokenizer([["a", "b"], ["c", "d"]]);
  (reversed.model.vocab as Record<string, number>)["ab"] = 257;
  (reversed.model.vocab as Record<string, number>)["cd"] = 256;
  const decision = planFastPath(reversed);
  assertEquals(decision.ok, false);
  if (!decision.ok) assertMatch(decision.reason, /do not follow token ids/);
  // "abc" is listed as ab+c, but "bc" merges first, so HF never reaches it while tiktoken would
  // merge a+bc (its concatenation is in the vocabulary).
  const unreachable = tinyTokenizer([["b", "c"], ["a", "b"], ["ab", "c"]]);
  const u = planFastPath(unreachable);
  assertEquals(u.ok, false);
  if (!u.ok) assertMatch(u.reason, /not reachable/);
});

Deno.test("a tokenizer whose vocabulary fails the checks falls back to the exact path and reports why", async () => {
  const json = tinyTokenizer([["b", "c"], ["a", "b"], ["ab", "c"]]);
  const tokenizer = await createLocalTokenizer({
    tokenizerJson: json,
    tokenizerConfig: {},
    source: "tiny",
  });
  assertEquals(tokenizer.info.fastPath, false);
  assertMatch(tokenizer.info.reason, /not reachable/);
  assertEquals(tokenizer.encode("abc").length, 2); // [a][bc]: "bc" merges first, "a bc" is no merge
});

Deno.test("hasLongRun() finds runs of one character class and ignores mixed text", () => {
  const table = new Uint8Array(65536);
  assert(hasLongRun("x" + "a".repeat(LONG_RUN_CHARS) + "!", LONG_RUN_CHARS, table));
  assert(hasLongRun("日本".repeat(LONG_RUN_CHARS), LONG_RUN_CHARS, table));
  assert(hasLongRun(" \t\n".repeat(LONG_RUN_CHARS), LONG_RUN_CHARS, table));
  assert(!hasLongRun("ab1 ".repeat(LONG_RUN_CHARS), LONG_RUN_CHARS, table));
  assert(!hasLongRun("a".repeat(LONG_RUN_CHARS - 1), LONG_RUN_CHARS, table));
});

Deno.test("dispose() frees the WASM encoder and later encodes fail with a clear message", async () => {
  const tokenizer = await createLocalTokenizer({
    tokenizerJson: await tokenizerJson("qwen3"),
    tokenizerConfig: {},
    source: "qwen3-dispose",
  }, { cacheMaxTokens: 0 });
  assert(tokenizer.info.fastPath);
  assertEquals(tokenizer.encode("hello"), [14990]);
  tokenizer.dispose();
  tokenizer.dispose(); // idempotent
  let message = "";
  try {
    tokenizer.encode("hello again");
  } catch (error) {
    message = (error as Error).message;
  }
  assertMatch(message, /disposed/);
});

/** POSIX [[:alpha:]] is ASCII-only in tiktoken's regex engine but Unicode in the library's rewrite,
 * so "é " is one piece for tiktoken and two for the library; the merge "©Ġ" then tells them apart. */
function posixTokenizerJson() {
  return tinyTokenizer([["©", "Ġ"]], {
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        {
          type: "Split",
          pattern: { Regex: "[[:alpha:]]+|[^[:alpha:]]+" },
          behavior: "Isolated",
          invert: false,
        },
        { type: "ByteLevel", add_prefix_space: false, use_regex: false, trim_offsets: false },
      ],
    },
  });
}

Deno.test("the load-time probe turns the fast path off when tiktoken's regex splits text differently", async () => {
  const json = posixTokenizerJson();
  assert(planFastPath(json).ok);
  const tokenizer = await createLocalTokenizer({
    tokenizerJson: json,
    tokenizerConfig: {},
    source: "posix",
  }, { pieceCacheEntries: 0 });
  assertEquals(tokenizer.info.fastPath, false);
  assertMatch(tokenizer.info.reason, /^probe text .* encodes differently on the fast path$/);
  assertEquals(tokenizer.encode("é x"), [...tokenizer.encodeSegmentExact("é x")]);
});

Deno.test("with pieces split by the library's own regex, that tokenizer keeps the fast path and its ids", async () => {
  const tokenizer = await createLocalTokenizer({
    tokenizerJson: posixTokenizerJson(),
    tokenizerConfig: {},
    source: "posix-pieces",
  }, { cacheMaxTokens: 0 });
  assert(tokenizer.info.fastPath, tokenizer.info.reason);
  for (const text of ["é x", "é ©", "aé © ©é\n", "x".repeat(40) + " ©"]) {
    assertEquals(tokenizer.encode(text), [...tokenizer.encodeSegmentExact(text)], text);
  }
  assert(tokenizer.stats().pieceCache!.hits > 0);
});

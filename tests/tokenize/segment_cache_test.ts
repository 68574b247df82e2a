import { assert, assertEquals } from "../assert.ts";
import { TokenSegmentCache } from "../../src/tokenize/segment_cache.ts";
import type { ChatMessage } from "../../src/tokenize/types.ts";
import { mulberry32 } from "../../src/sim/rng.ts";
import { packagedTokenizer } from "./fixtures.ts";

const ids = (...values: number[]) => Uint32Array.from(values);

Deno.test("TokenSegmentCache evicts least recently used segments to stay within its token budget", () => {
  const cache = new TokenSegmentCache({ maxTokens: 5 });
  const scope = cache.scope("m");
  scope.set("a", ids(1, 2));
  scope.set("b", ids(3, 4));
  assertEquals(scope.get("a"), ids(1, 2)); // a is now the most recent
  scope.set("c", ids(5, 6)); // 6 tokens > 5: evicts b, the least recent
  assertEquals(scope.get("b"), undefined);
  assertEquals(scope.get("a"), ids(1, 2));
  assertEquals(scope.get("c"), ids(5, 6));
  const stats = cache.stats();
  assertEquals([stats.tokens, stats.entries, stats.evictions], [4, 2, 1]);
  assertEquals([stats.hits, stats.misses, stats.hitTokens], [3, 1, 6]);
});

Deno.test("TokenSegmentCache bounds the characters of cached segments and skips oversized entries", () => {
  const cache = new TokenSegmentCache({ maxTokens: 100, maxChars: 10 });
  const scope = cache.scope("m");
  scope.set("0123456789abc", ids(1)); // longer than the whole budget: not cached
  assertEquals(scope.get("0123456789abc"), undefined);
  scope.set("01234", ids(1));
  scope.set("56789", ids(2));
  scope.set("xy", ids(3)); // 12 chars: evicts "01234"
  assertEquals(scope.get("01234"), undefined);
  assertEquals(cache.stats().chars, 7);
});

Deno.test("TokenSegmentCache bounds its entries: tiny unique segments do not fill the token budget one by one", () => {
  // Each entry costs ~400 bytes besides its ids (entry, Uint32Array and its buffer, key, Map slot):
  // a soak's unique ~10-token question per request held 4M tokens as ~400k entries, ~160 MB a cache.
  const cache = new TokenSegmentCache({ maxTokens: 1_280_000 });
  assertEquals(cache.maxEntries, 10_000); // one entry per 128 tokens of budget
  const scope = cache.scope("m");
  for (let n = 0; n < 50_000; n++) scope.set(`user\nQuestion ${n}: what changed?`, ids(1, 2, 3, 4));
  const stats = cache.stats();
  assertEquals([stats.entries, stats.maxEntries, stats.evictions], [10_000, 10_000, 40_000]);
  assertEquals(scope.get("user\nQuestion 49999: what changed?"), ids(1, 2, 3, 4));
  assertEquals(scope.get("user\nQuestion 0: what changed?"), undefined);
  // Small budgets keep a floor of entries; an explicit bound wins.
  assertEquals(new TokenSegmentCache({ maxTokens: 5 }).maxEntries, 1024);
  const explicit = new TokenSegmentCache({ maxTokens: 100, maxEntries: 2 });
  const s2 = explicit.scope("m");
  for (const key of ["a", "b", "c"]) s2.set(key, ids(1));
  assertEquals([s2.get("a"), explicit.stats().entries], [undefined, 2]);
});

Deno.test("TokenSegmentCache keeps scopes apart while sharing one budget", () => {
  const cache = new TokenSegmentCache({ maxTokens: 3 });
  const qwen = cache.scope("qwen");
  const llama = cache.scope("llama");
  qwen.set("hello", ids(1, 2));
  assertEquals(llama.get("hello"), undefined);
  llama.set("hello", ids(9, 9)); // 4 tokens in all: evicts qwen's entry
  assertEquals(qwen.get("hello"), undefined);
  assertEquals(llama.get("hello"), ids(9, 9));
  cache.clear();
  assertEquals(cache.stats().entries, 0);
  assertEquals(llama.get("hello"), undefined);
});

const WORDS = "alpha beta gamma delta naïve 数学 🚀 code() {x} 42 3.14 \n \t".split(" ");
const SPECIALS = [
  "<|im_start|>",
  "<|im_end|>",
  "<think>",
  "</think>",
  "<tool_call>",
  "<|endoftext|>",
  "<|fim_pad|>",
];

function randomText(rnd: () => number, maxWords: number, specials = true): string {
  let text = "";
  const n = 1 + Math.floor(rnd() * maxWords);
  for (let i = 0; i < n; i++) {
    const r = rnd();
    if (specials && r < 0.08) text += SPECIALS[Math.floor(rnd() * SPECIALS.length)];
    else if (r < 0.12) text += " ".repeat(1 + Math.floor(rnd() * 8));
    else text += WORDS[Math.floor(rnd() * WORDS.length)] + (rnd() < 0.7 ? " " : "");
  }
  return text;
}

function randomConversation(rnd: () => number, turns: number): ChatMessage[] {
  const messages: ChatMessage[] = [];
  if (rnd() < 0.5) messages.push({ role: "system", content: randomText(rnd, 30) });
  for (let t = 0; t < turns; t++) {
    messages.push({ role: "user", content: randomText(rnd, 40) });
    if (t < turns - 1) {
      const thinking = rnd() < 0.3 ? `<think>\n${randomText(rnd, 10)}\n</think>\n\n` : "";
      messages.push({ role: "assistant", content: thinking + randomText(rnd, 40) });
    }
  }
  return messages;
}

Deno.test("cached ids equal a full uncached encode on random conversations holding special-token text", async () => {
  const cached = await packagedTokenizer("qwen3", { cacheMaxTokens: 2_000 }); // small: evictions happen
  const exact = await packagedTokenizer("qwen3", { fastPath: false, cacheMaxTokens: 0 });
  const rnd = mulberry32(42);
  for (let c = 0; c < 40; c++) {
    const conversation = randomConversation(rnd, 1 + Math.floor(rnd() * 8));
    for (let end = 1; end <= conversation.length; end++) {
      const messages = conversation.slice(0, end);
      if (messages[messages.length - 1].role !== "user") continue;
      const rendered = cached.renderChat(messages);
      const full = [...exact.encodeSegmentExact(rendered)]; // the library, whole text, no cache
      assertEquals(cached.encodeChat(messages), full);
      // Completions too, where special-token text is typed by the user.
      assertEquals(cached.encode(rendered), full);
    }
  }
  const stats = cached.stats().cache!;
  assert(stats.hits > 0 && stats.evictions > 0, JSON.stringify(stats));
});

Deno.test("a conversation growing to 20 turns re-encodes only the new turn on each request", async () => {
  const tokenizer = await packagedTokenizer("qwen3", { cacheMaxTokens: 1_000_000 });
  const reference = await packagedTokenizer("qwen3", { fastPath: false, cacheMaxTokens: 0 });
  const rnd = mulberry32(7);
  const messages: ChatMessage[] = [{
    role: "system",
    content: "You are a careful assistant. " + randomText(rnd, 200, false),
  }];
  for (let turn = 0; turn < 20; turn++) {
    const user = `Question ${turn}: ` + randomText(rnd, 150, false);
    messages.push({ role: "user", content: user });
    const before = tokenizer.stats();
    const ids = tokenizer.encodeChat(messages);
    const after = tokenizer.stats();
    assertEquals(ids, [...reference.encodeSegmentExact(reference.renderChat(messages))]);
    const encodedChars = after.charsEncoded - before.charsEncoded;
    const previousReply = turn > 0 ? (messages[messages.length - 2].content as string).length : 0;
    if (turn > 0) {
      // New text: the user turn and the previous reply (now closed by <|im_end|>), and nothing older.
      assert(
        after.segmentsEncoded - before.segmentsEncoded <= 3,
        `turn ${turn}: ${after.segmentsEncoded - before.segmentsEncoded} segments`,
      );
      assert(
        encodedChars <= user.length + previousReply + 64,
        `turn ${turn}: ${encodedChars} chars encoded`,
      );
    }
    messages.push({ role: "assistant", content: `Answer ${turn}: ` + randomText(rnd, 150, false) });
  }
});

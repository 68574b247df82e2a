/**
 * Deterministic English-like text and conversations for the benchmarks (predispatch_bench.ts,
 * overhead/workloads.ts): same seed, same words, so runs compare.
 */
import type { ChatMessage } from "../../src/tokenize/types.ts";

const WORDS = ("the router sends every request to the instance where it will get its first token " +
  "soonest because the prefix cache already holds most of the prompt and the queue is short " +
  "while the other engines are busy with long documents and many users ask follow up questions")
  .split(" ");

/** `words` words drawn by a small LCG from `seed`, a newline every 13. */
export function benchText(seed: number, words: number): string {
  let s = seed >>> 0;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out.push(WORDS[s % WORDS.length]);
    if (i % 13 === 12) out.push("\n");
  }
  return out.join(" ");
}

/** A system prompt and `turns` alternating user/assistant turns of 350 words (~8k tokens at 14). */
export function benchConversation(seed: number, turns: number, systemWords = 3000): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: "system", content: benchText(seed, systemWords) }];
  for (let t = 0; t < turns; t++) {
    messages.push({
      role: t % 2 === 0 ? "user" : "assistant",
      content: benchText(seed * 31 + t, 350),
    });
  }
  return messages;
}

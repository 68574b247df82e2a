/**
 * The workload of tests/real/policy_comparison_bench.ts: long documents picked with Zipf
 * popularity, each request a document and a question of its own, the same for every arm (seeded).
 */
import { mulberry32 } from "../../src/sim/rng.ts";
import type { ChatMessage } from "../../src/tokenize/types.ts";

/** Documents in a workload unless asked otherwise (the runs in docs/real_policy_comparison.md). */
export const DOCUMENTS = 12;
export const ZIPF_S = 1.1;
const DOC_TOKENS = { min: 1_500, max: 2_000 };

export const WORDS = (
  "river stone harbor lantern meadow copper signal valley engine garden window silver market " +
  "orchard bridge ledger thunder compass shadow anchor timber canvas meadowlark granite beacon " +
  "ferry quarry pepper saddle glacier cobalt amber tunnel orbit cedar falcon harvest marble " +
  "pilot ribbon summit velvet willow ember forge island jasper kettle linen mosaic nectar " +
  "opal prairie quill raven saffron tundra umber vessel wharf yarrow zephyr archive budget " +
  "census charter contract deadline estimate freight gauge inventory journal kernel latency " +
  "mandate network outage payload quota receipt schedule tariff upgrade voucher warranty " +
  "allocate measure deliver inspect recover transfer approve reject forecast balance settle " +
  "north south eastern western early late quiet rapid narrow broad heavy light distant local"
).split(/\s+/);

export interface Workload {
  documents: string[];
  documentTokens: number[];
  /** Per request: which document, and its own question. */
  requests: { doc: number; question: string }[];
}

/** Documents of DOC_TOKENS tokens (the real tokenizer counts), Zipf-picked, unique questions. */
export function makeWorkload(
  options: { seed: number; requests: number; documents?: number },
  countTokens: (text: string) => number,
): Workload {
  // Unmixed mulberry32 from the seed: the sequence of the runs in docs/real_policy_comparison.md.
  const random = mulberry32(options.seed);
  const word = () => WORDS[Math.floor(random() * WORDS.length)];
  const documents: string[] = [];
  const documentTokens: number[] = [];
  for (let d = 0; d < (options.documents ?? DOCUMENTS); d++) {
    const target = DOC_TOKENS.min + Math.floor(random() * (DOC_TOKENS.max - DOC_TOKENS.min));
    const sentences = [`Document ${d}.`];
    let tokens = countTokens(sentences[0]);
    while (tokens < target) {
      const length = 6 + Math.floor(random() * 10);
      const sentence = Array.from({ length }, word).join(" ");
      sentences.push(`${sentence[0].toUpperCase()}${sentence.slice(1)}.`);
      tokens = countTokens(sentences.join(" "));
    }
    documents.push(sentences.join(" "));
    documentTokens.push(tokens);
  }
  const weights = documents.map((_, k) => 1 / Math.pow(k + 1, ZIPF_S));
  const total = weights.reduce((s, w) => s + w, 0);
  const pick = () => {
    let r = random() * total;
    for (let k = 0; k < weights.length; k++) {
      r -= weights[k];
      if (r < 0) return k;
    }
    return weights.length - 1;
  };
  const requests = Array.from({ length: options.requests }, (_, i) => ({
    doc: pick(),
    question: `Question ${i}: what does it say about the ${word()} and the ${word()}?`,
  }));
  return { documents, documentTokens, requests };
}

export function messagesOf(workload: Workload, index: number): ChatMessage[] {
  const { doc, question } = workload.requests[index];
  return [{ role: "system", content: workload.documents[doc] }, {
    role: "user",
    content: question,
  }];
}

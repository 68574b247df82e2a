/**
 * The request mixes of tests/bench/overhead_bench.ts, as body templates for post.lua: one JSON
 * body per line, `@@ID@@` standing for a number unique to each request. Text comes from the same
 * word generator as predispatch_bench.ts; token counts are measured with the Qwen3 tokenizer.
 */
import type { LoadedTokenizer } from "../../../src/tokenize/local_tokenizer.ts";
import { benchConversation, benchText } from "../bench_text.ts";
import type { ChatMessage } from "../../../src/tokenize/types.ts";

export const MARKER = "@@ID@@";

export const MIX_NAMES = [
  "tokens8k",
  "chat8k-new",
  "chat-growing",
  "short",
  "sse256",
  "sse500",
] as const;

export interface Mix {
  name: string;
  description: string;
  path: "/v1/completions" | "/v1/chat/completions";
  /** Served by the SSE engine stub (model `qwen3-sse`). */
  sse: boolean;
  /** wrk connections (the default mixes use the benchmark's `--connections`). */
  connections?: number;
  bodies: string[];
  /** Prompt tokens of the bodies (min-max), as the router counts them. */
  tokens: [number, number];
}

/** Every message starts with the request's unique number: every segment is new to the cache. */
function marked(messages: ChatMessage[]): ChatMessage[] {
  return messages.map((m) => ({ ...m, content: `${MARKER} ${m.content}` }));
}

/** JSON text with the marker placed where a number goes (token ids) or inside a string. */
function withMarker(body: unknown): string {
  return JSON.stringify(body).replaceAll(`"${MARKER}"`, MARKER);
}

function tokenRange(counts: number[]): [number, number] {
  return [Math.min(...counts), Math.max(...counts)];
}

export function buildMixes(tokenizer: LoadedTokenizer): Mix[] {
  const chatTokens = (messages: ChatMessage[]) =>
    tokenizer.encodeChat(
      messages.map((m) => ({ ...m, content: String(m.content).replace(MARKER, "123456") })),
    )
      .length;

  // 8k token ids of real text; the first id is the request's number.
  const tokenBodies: string[] = [];
  for (let seed = 1; seed <= 8; seed++) {
    const ids = tokenizer.encode(benchText(500 + seed, 9000), { addSpecialTokens: false }).slice(
      0,
      8192,
    );
    if (ids.length < 8192) throw new Error("the generated text is shorter than 8192 tokens");
    tokenBodies.push(
      withMarker({ model: "qwen3", prompt: [MARKER, ...ids.slice(1)], max_tokens: 16 }),
    );
  }

  // New conversations of ~8.7k tokens: every message of every request is text never seen before.
  const newChats = Array.from({ length: 8 }, (_, i) => marked(benchConversation(1000 + i, 14)));
  const newBodies = newChats.map((messages) =>
    withMarker({ model: "qwen3", messages, max_tokens: 16 })
  );

  // One conversation growing by a turn: the history so far (seen before, cached after its first
  // request) plus a new user turn that is unique to the request.
  const base = benchConversation(7, 40);
  const growing: ChatMessage[][] = [];
  for (let turns = 8; turns <= 22; turns += 2) {
    growing.push([...base.slice(0, 1 + turns), {
      role: "user",
      content: `${MARKER} ${benchText(9000 + turns, 350)}`,
    }]);
  }
  const growingBodies = growing.map((messages) =>
    withMarker({ model: "qwen3", messages, max_tokens: 16 })
  );

  // Short chats, under minPromptTokens (1024): tokenized, no store lookup.
  const short = Array.from({ length: 8 }, (_, i) =>
    marked([
      { role: "system", content: benchText(3000 + i, 40) },
      { role: "user", content: benchText(4000 + i, 120) },
    ]));
  const shortBodies = short.map((messages) =>
    withMarker({ model: "qwen3", messages, max_tokens: 16 })
  );

  // Streams of 256 tokens from a short chat.
  const sseChats = Array.from(
    { length: 8 },
    (_, i) => marked([{ role: "user", content: benchText(5000 + i, 60) }]),
  );
  const sseBodies = sseChats.map((messages) =>
    withMarker({
      model: "qwen3-sse",
      messages,
      max_tokens: 256,
      stream: true,
      stream_options: { include_usage: true },
    })
  );
  const sseTokens = tokenRange(sseChats.map(chatTokens));

  return [
    {
      name: "tokens8k",
      description: "8k-token token-id completions (no tokenization; hash 32 chunks; lookup)",
      path: "/v1/completions",
      sse: false,
      bodies: tokenBodies,
      tokens: [8192, 8192],
    },
    {
      name: "chat8k-new",
      description: "8k-token chats, each a new conversation (template + tokenize all; lookup)",
      path: "/v1/chat/completions",
      sse: false,
      bodies: newBodies,
      tokens: tokenRange(newChats.map(chatTokens)),
    },
    {
      name: "chat-growing",
      description: "a conversation growing by one new turn (history cached; lookup)",
      path: "/v1/chat/completions",
      sse: false,
      bodies: growingBodies,
      tokens: tokenRange(growing.map(chatTokens)),
    },
    {
      name: "short",
      description: "short chats under minPromptTokens (tokenize; no lookup)",
      path: "/v1/chat/completions",
      sse: false,
      bodies: shortBodies,
      tokens: tokenRange(short.map(chatTokens)),
    },
    {
      name: "sse256",
      description: "short chats streaming 256 SSE chunks back",
      path: "/v1/chat/completions",
      sse: true,
      bodies: sseBodies,
      tokens: sseTokens,
    },
    {
      name: "sse500",
      description: "the same streams, 500 concurrent connections",
      path: "/v1/chat/completions",
      sse: true,
      connections: 500,
      bodies: sseBodies,
      tokens: sseTokens,
    },
  ];
}

import { assert, assertEquals } from "../assert.ts";
import { MAX_SSE_LINE_CHARS } from "../../src/proxy/sse_lines.ts";
import { UsageSniffer } from "../../src/proxy/usage_sniffer.ts";

const encoder = new TextEncoder();

const SSE = "text/event-stream; charset=utf-8";

/** An OpenAI-style SSE stream: one event per text piece, then a usage event and [DONE]. */
function sseStream(pieces: string[], usage?: Record<string, unknown>): string {
  const events = pieces.map((text, i) => ({
    id: "cmpl-1",
    object: "text_completion",
    choices: [{ index: 0, text, finish_reason: i === pieces.length - 1 ? "stop" : null }],
  }));
  const frames = events.map((e) => `data: ${JSON.stringify(e)}\n\n`);
  if (usage) frames.push(`data: ${JSON.stringify({ id: "cmpl-1", choices: [], usage })}\n\n`);
  return frames.join("") + "data: [DONE]\n\n";
}

/** Feeds `bytes` cut at `cuts`; returns the events each push completed. */
function feed(sniffer: UsageSniffer, bytes: Uint8Array, cuts: number[]): number[] {
  const bounds = [0, ...cuts.filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b)];
  bounds.push(bytes.length);
  const completed: number[] = [];
  for (let i = 1; i < bounds.length; i++) {
    completed.push(sniffer.push(bytes.slice(bounds[i - 1], bounds[i])));
  }
  return completed;
}

/** Deterministic pseudo-random cut points (a small LCG), so a failure can be replayed. */
function randomCuts(length: number, count: number, seed: number): number[] {
  let state = seed;
  const cuts: number[] = [];
  for (let i = 0; i < count; i++) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    cuts.push(1 + (state % (length - 1)));
  }
  return cuts;
}

const USAGE = {
  prompt_tokens: 1200,
  completion_tokens: 3,
  total_tokens: 1203,
  prompt_tokens_details: { cached_tokens: 1024 },
};
const EXPECTED = { promptTokens: 1200, completionTokens: 3, cachedTokens: 1024 };

Deno.test("UsageSniffer: SSE usage and event count are the same however the stream is cut", () => {
  const bytes = encoder.encode(sseStream(["Hello", " wor", "ld"], USAGE));
  const whole = new UsageSniffer(SSE);
  assertEquals(feed(whole, bytes, []), [4], "three text events and the usage event; not [DONE]");
  assertEquals(whole.finish(), EXPECTED);

  const cutsList = [
    // Every single byte on its own.
    Array.from({ length: bytes.length }, (_, i) => i),
    // Inside "data:", inside the usage JSON, between the two newlines of a frame.
    [3, bytes.indexOf(0x75, /* u */ bytes.length - 80), bytes.indexOf(0x0a) + 1],
    ...[1, 2, 3, 4, 5].map((seed) => randomCuts(bytes.length, 7, seed)),
  ];
  for (const cuts of cutsList) {
    const sniffer = new UsageSniffer(SSE);
    const completed = feed(sniffer, bytes, cuts);
    const label = `cuts ${cuts.slice(0, 10).join(",")}`;
    assertEquals(completed.reduce((a, b) => a + b, 0), 4, label);
    assertEquals(sniffer.events, 4, label);
    assertEquals(sniffer.finish(), EXPECTED, label);
  }
});

Deno.test("UsageSniffer: CRLF line endings and `data:` without a space, cut between \\r and \\n", () => {
  const text = sseStream(["a", "b"], USAGE).replaceAll("data: ", "data:").replaceAll("\n", "\r\n");
  const bytes = encoder.encode(text);
  const cuts = [...text.matchAll(/\r/g)].map((m) => m.index! + 1);
  const sniffer = new UsageSniffer(SSE);
  assertEquals(feed(sniffer, bytes, cuts).reduce((a, b) => a + b, 0), 3);
  assertEquals(sniffer.finish(), EXPECTED);
});

Deno.test("UsageSniffer: [DONE] is not an event and a stream without usage reports none", () => {
  const sniffer = new UsageSniffer(SSE);
  assertEquals(sniffer.isStream, true);
  const bytes = encoder.encode(sseStream(["a", "b"]));
  assertEquals(feed(sniffer, bytes, [5, 40]).reduce((a, b) => a + b, 0), 2);
  assertEquals(sniffer.events, 2);
  assertEquals(sniffer.finish(), {});

  const done = new UsageSniffer(SSE);
  assertEquals(done.push(encoder.encode("data: [DONE]\n\n")), 0);
  assertEquals(done.events, 0);
  assertEquals(done.finish(), {});
});

Deno.test("UsageSniffer: usage without prompt_tokens_details leaves cachedTokens unset", () => {
  const sniffer = new UsageSniffer(SSE);
  const usage = { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 };
  feed(sniffer, encoder.encode(sseStream(["x"], usage)), [9]);
  assertEquals(sniffer.finish(), {
    promptTokens: 10,
    completionTokens: 2,
    cachedTokens: undefined,
  });

  // vLLM sends `prompt_tokens_details: null` when prefix caching stats are off.
  const nulled = new UsageSniffer(SSE);
  feed(nulled, encoder.encode(sseStream(["x"], { ...usage, prompt_tokens_details: null })), []);
  assertEquals(nulled.finish().cachedTokens, undefined);
});

Deno.test("UsageSniffer: cached_tokens is read from usage.prompt_tokens_details only", () => {
  const sniffer = new UsageSniffer(SSE);
  // A top-level or misplaced cached_tokens is not the engine's prompt-cache figure.
  const usage = { prompt_tokens: 10, completion_tokens: 2, cached_tokens: 7 };
  feed(sniffer, encoder.encode(sseStream(["x"], usage)), []);
  assertEquals(sniffer.finish().cachedTokens, undefined);

  const right = new UsageSniffer(SSE);
  const details = { ...usage, prompt_tokens_details: { cached_tokens: 8 } };
  feed(right, encoder.encode(sseStream(["x"], details)), []);
  assertEquals(right.finish().cachedTokens, 8);
});

Deno.test("UsageSniffer: a JSON body is read at the end, whatever its chunks", () => {
  const body = JSON.stringify({
    id: "cmpl-2",
    object: "text_completion",
    choices: [{ index: 0, text: "data: not an event", finish_reason: "stop" }],
    usage: USAGE,
  });
  const bytes = encoder.encode(body);
  for (const cuts of [[], [1, 2, 3], randomCuts(bytes.length, 6, 42)]) {
    const sniffer = new UsageSniffer("application/json");
    assertEquals(sniffer.isStream, false);
    const completed = feed(sniffer, bytes, cuts);
    assert(completed.every((n) => n === 0), "a JSON body has no SSE events");
    assertEquals(sniffer.usage, {}, "nothing is known before the end");
    assertEquals(sniffer.finish(), EXPECTED);
    assertEquals(sniffer.events, 0);
  }
});

Deno.test("UsageSniffer: a JSON body without usage, or not JSON at all, reports none", () => {
  const without = new UsageSniffer("application/json");
  without.push(encoder.encode(JSON.stringify({ choices: [{ text: "hi" }] })));
  assertEquals(without.finish(), {});

  const broken = new UsageSniffer(null);
  broken.push(encoder.encode('{"usage": {"prompt_tokens": 5'));
  assertEquals(broken.finish(), {});
});

Deno.test("UsageSniffer: an endless line is skipped, never buffered whole, and the events after it still count", () => {
  const sniffer = new UsageSniffer(SSE);
  const kilobyte = encoder.encode("x".repeat(1024));
  for (let i = 0; i < 3 * 1024; i++) {
    sniffer.push(kilobyte); // 3 MiB without a newline
    assert(sniffer.bufferedChars <= MAX_SSE_LINE_CHARS, `${sniffer.bufferedChars} chars held`);
  }
  const tail = sseStream(["a", "b"], USAGE);
  assertEquals(sniffer.push(encoder.encode(`data: {"usage": {"prompt_tokens": 1}}\n${tail}`)), 3);
  assertEquals(sniffer.finish(), EXPECTED, "the oversized line is dropped, not parsed");
});

Deno.test("Anthropic usage: a message's, and a stream's message_start then message_delta", () => {
  const json = new UsageSniffer("application/json");
  json.push(new TextEncoder().encode(JSON.stringify({
    type: "message",
    usage: { input_tokens: 10, cache_read_input_tokens: 256, output_tokens: 4 },
  })));
  assertEquals(json.finish(), { promptTokens: 266, completionTokens: 4, cachedTokens: 256 });
  const sse = new UsageSniffer("text/event-stream");
  const events = [
    {
      type: "message_start",
      message: { usage: { input_tokens: 3, cache_read_input_tokens: 128 } },
    },
    { type: "content_block_delta", delta: { type: "text_delta", text: "hi" } },
    { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 7 } },
  ];
  for (const event of events) {
    sse.push(new TextEncoder().encode(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`));
  }
  assertEquals(sse.finish(), { promptTokens: 131, completionTokens: 7, cachedTokens: 128 });
});

Deno.test("a Responses answer's id and usage are read from its body or its events", () => {
  const usage = {
    input_tokens: 300,
    input_tokens_details: { cached_tokens: 256 },
    output_tokens: 2,
  };
  const json = new UsageSniffer("application/json");
  json.push(new TextEncoder().encode(JSON.stringify({ id: "resp_1", object: "response", usage })));
  assertEquals(json.finish(), { promptTokens: 300, completionTokens: 2, cachedTokens: 256 });
  assertEquals(json.responseId, "resp_1");
  const sse = new UsageSniffer("text/event-stream");
  const created = { type: "response.created", response: { id: "resp_2", object: "response" } };
  const completed = {
    type: "response.completed",
    response: { id: "resp_2", object: "response", usage },
  };
  for (const event of [created, completed]) {
    sse.push(new TextEncoder().encode(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`));
  }
  assertEquals(sse.finish().cachedTokens, 256);
  assertEquals(sse.responseId, "resp_2");
});

Deno.test("UsageSniffer: SGLang /generate usage is each item's meta_info, summed over a batch", () => {
  const meta = (prompt: number, done: boolean) => ({
    id: "r",
    finish_reason: done ? { type: "length", length: 2 } : null,
    prompt_tokens: prompt,
    completion_tokens: done ? 2 : 1,
    cached_tokens: prompt / 2,
  });
  const json = new UsageSniffer("application/json");
  json.push(new TextEncoder().encode(JSON.stringify({ text: "ab", meta_info: meta(40, true) })));
  assertEquals(json.finish(), { promptTokens: 40, completionTokens: 2, cachedTokens: 20 });

  const list = new UsageSniffer("application/json");
  const items = [{ text: "a", meta_info: meta(40, true) }, {
    text: "b",
    meta_info: meta(60, true),
  }];
  list.push(new TextEncoder().encode(JSON.stringify(items)));
  assertEquals(list.finish(), { promptTokens: 100, completionTokens: 4, cachedTokens: 50 });

  const sse = new UsageSniffer("text/event-stream");
  const events = [
    { text: "a", meta_info: meta(40, false), index: 0 },
    { text: "b", meta_info: meta(60, false), index: 1 },
    { text: "ab", meta_info: meta(40, true), index: 0 },
    { text: "bc", meta_info: meta(60, true), index: 1 },
  ].map((e) => `data: ${JSON.stringify(e)}\n\n`).join("") + "data: [DONE]\n\n";
  const bytes = new TextEncoder().encode(events);
  assertEquals(feed(sse, bytes, randomCuts(bytes.length, 9, 7)).reduce((a, b) => a + b), 4);
  assertEquals(sse.finish(), { promptTokens: 100, completionTokens: 4, cachedTokens: 50 });

  const unfinished = new UsageSniffer("text/event-stream");
  const pending = { text: "a", meta_info: meta(40, false) };
  unfinished.push(new TextEncoder().encode(`data: ${JSON.stringify(pending)}\n\n`));
  assertEquals(unfinished.finish(), {}, "an item not finished has not reported its usage");
});

Deno.test("UsageSniffer: the usage keys are found wherever they fall in a chunk of many events", () => {
  const usage = {
    prompt_tokens: 50,
    completion_tokens: 2,
    prompt_tokens_details: { cached_tokens: 32 },
  };
  const created = { type: "response.created", response: { id: "resp_9", object: "response" } };
  const text = [
    `event: response.created\ndata: ${JSON.stringify(created)}\n\n`,
    // Content that quotes the keys is not usage: JSON escapes its quotes.
    `data: ${
      JSON.stringify({ choices: [{ delta: { content: 'say "usage" or "meta_info"' } }] })
    }\n\n`,
    `data: ${JSON.stringify({ choices: [{ delta: { content: "b" } }] })}\n\n`,
    `data: ${JSON.stringify({ choices: [], usage })}\n\n`,
    `data: ${JSON.stringify({ choices: [{ delta: { content: "after" } }] })}\n\n`,
    "data: [DONE]\n\n",
  ].join("");
  const bytes = encoder.encode(text);
  const cutsList = [
    [],
    Array.from({ length: bytes.length }, (_, i) => i),
    randomCuts(bytes.length, 9, 7),
  ];
  for (const cuts of cutsList) {
    const sniffer = new UsageSniffer(SSE);
    const label = `${cuts.length} cuts`;
    assertEquals(feed(sniffer, bytes, cuts).reduce((a, b) => a + b, 0), 5, label);
    assertEquals(
      sniffer.finish(),
      { promptTokens: 50, completionTokens: 2, cachedTokens: 32 },
      label,
    );
    assertEquals(sniffer.responseId, "resp_9", label);
  }
});

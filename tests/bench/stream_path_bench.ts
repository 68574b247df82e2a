/**
 * Three per-chunk steps of relaying a streamed answer, each against the implementation it
 * replaced, measured in the same run: `deno task bench:stream`.
 *
 * - usage sniffing: three substring searches per SSE line for the keys that carry usage (the
 *   reference, kept here) against `UsageSniffer` (one regular-expression pass per chunk);
 * - bounded reads: a timer, a race and an abort listener per read (the reference, kept here)
 *   against `ReadWatchdog` (one timer per body);
 * - the relayed body without the usage the router asked for: `observeBody` piped through a
 *   TransformStream that decoded every chunk to look for the key (the reference, kept here)
 *   against `observeBody` rewriting with `UsageChunkFilter` in its own pull.
 *
 * The input is the overhead benchmark's 256-token stream (tests/bench/overhead/stubs.ts), fed one
 * event per chunk as an engine writes it, and whole as the benchmark's nginx stub sends it.
 * Prints µs per streamed answer (median of rounds) and the ratio to the reference.
 */
import { SseLines } from "../../src/proxy/sse_lines.ts";
import { UsageSniffer } from "../../src/proxy/usage_sniffer.ts";
import {
  type BodyLimits,
  ReadWatchdog,
  UpstreamStalledError,
} from "../../src/proxy/read_watchdog.ts";
import { observeBody } from "../../src/proxy/observed_body.ts";
import { UsageChunkFilter, UsageLineFilter } from "../../src/proxy/usage_chunk_filter.ts";
import { sseBody } from "./overhead/stubs.ts";
import { takeNoArguments } from "./bench_arguments.ts";

const USAGE = `Usage: deno task bench:stream

µs per streamed answer of usage sniffing, of bounded reads and of relaying without the usage,
each beside the implementation it replaced, measured in the same run.`;

const ROUNDS = 15;

/** The sniffer's line scan as it was: every data line searched for each key. */
function referenceSniff(chunks: Uint8Array[]): number {
  const decoder = new TextDecoder();
  let events = 0;
  const lines = new SseLines((line) => {
    if (!line.startsWith("data:")) return;
    const data = line.slice(5).trim();
    if (data === "[DONE]" || data === "") return;
    events++;
    if (data.includes('"usage"') || data.includes('"response.created"')) JSON.parse(data);
    else if (data.includes('"meta_info"')) JSON.parse(data);
  });
  for (const chunk of chunks) lines.push(decoder.decode(chunk, { stream: true }));
  return events;
}

function sniff(chunks: Uint8Array[]): number {
  const sniffer = new UsageSniffer("text/event-stream");
  for (const chunk of chunks) sniffer.push(chunk);
  sniffer.finish();
  return sniffer.events;
}

/** A read bounded as it was: its own timer, a race and an abort listener. */
async function referenceRead(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  limits: BodyLimits,
  endBy: number,
): Promise<ReadableStreamReadResult<Uint8Array>> {
  const left = endBy - performance.now();
  const waitMs = Math.max(0, Math.min(limits.idleTimeoutMs, left));
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort = () => {};
  const stopped = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new UpstreamStalledError("stalled")), waitMs);
    onAbort = () => reject(limits.abort?.reason);
    limits.abort?.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([reader.read(), stopped]);
  } finally {
    clearTimeout(timer);
    limits.abort?.removeEventListener("abort", onAbort);
  }
}

function source(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  let next = 0;
  return new ReadableStream({
    pull(controller) {
      if (next < chunks.length) controller.enqueue(chunks[next++]);
      else controller.close();
    },
  });
}

const LIMITS: BodyLimits = {
  idleTimeoutMs: 30_000,
  maxDurationMs: 600_000,
  abort: new AbortController().signal,
};

async function readAllReference(chunks: Uint8Array[]): Promise<number> {
  const reader = source(chunks).getReader();
  const endBy = performance.now() + LIMITS.maxDurationMs;
  let read = 0;
  while (!(await referenceRead(reader, LIMITS, endBy)).done) read++;
  return read;
}

async function readAll(chunks: Uint8Array[]): Promise<number> {
  const watchdog = new ReadWatchdog(source(chunks).getReader(), LIMITS);
  let read = 0;
  while (!(await watchdog.read()).done) read++;
  watchdog.dispose();
  return read;
}

/** The usage filter as it was: a stream of its own behind the body, decoding every chunk. */
function referenceUsageFilter(): TransformStream<Uint8Array, Uint8Array> {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  const lines = new UsageLineFilter();
  let decoderClear = true;
  return new TransformStream({
    transform(chunk, controller) {
      if (chunk.byteLength === 0) return;
      const text = decoder.decode(chunk, { stream: true });
      const untouched = decoderClear && lines.idle && chunk[chunk.byteLength - 1] === 0x0a &&
        !text.includes('"usage"');
      decoderClear = chunk[chunk.byteLength - 1] < 0x80;
      if (untouched) return controller.enqueue(chunk);
      const out = lines.push(text);
      if (out) controller.enqueue(encoder.encode(out));
    },
    flush(controller) {
      const out = lines.end(decoder.decode());
      if (out) controller.enqueue(encoder.encode(out));
    },
  });
}

async function drain(body: ReadableStream<Uint8Array>): Promise<string> {
  return await new Response(body).text();
}

const observer = { onEnd() {}, onChunk() {}, onFirstByte() {} };

function relayReference(chunks: Uint8Array[]): Promise<string> {
  return drain(observeBody(source(chunks), observer, LIMITS).pipeThrough(referenceUsageFilter()));
}

function relay(chunks: Uint8Array[]): Promise<string> {
  return drain(observeBody(source(chunks), observer, LIMITS, new UsageChunkFilter()));
}

/** Median µs per call of `fn` over ROUNDS rounds of `calls` calls. */
async function microsPerCall(fn: () => unknown, calls: number): Promise<number> {
  const rounds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = performance.now();
    for (let i = 0; i < calls; i++) await fn();
    rounds.push(((performance.now() - start) * 1000) / calls);
  }
  rounds.sort((a, b) => a - b);
  return rounds[Math.floor(rounds.length / 2)];
}

function row(step: string, input: string, reference: number, now: number): string {
  const ratio = (now / reference).toFixed(2);
  return `| ${step} | ${input} | ${reference.toFixed(1)} | ${now.toFixed(1)} | ${ratio}× |`;
}

takeNoArguments(USAGE);
const encoder = new TextEncoder();
const text = sseBody();
const perEvent = text.split("\n\n").filter(Boolean).map((event) => encoder.encode(`${event}\n\n`));
const whole = [encoder.encode(text)];
if (referenceSniff(perEvent) !== sniff(perEvent) || sniff(whole) !== sniff(perEvent)) {
  throw new Error("the two sniffers count different events");
}
console.log("| step | input | reference µs | now µs | now ÷ reference |");
console.log("|---|---|---:|---:|---:|");
for (const [input, chunks] of [["one event a chunk", perEvent], ["one chunk", whole]] as const) {
  const label = `${perEvent.length} events, ${input}`;
  const reference = await microsPerCall(() => referenceSniff(chunks), 500);
  console.log(
    row("usage sniffing", label, reference, await microsPerCall(() => sniff(chunks), 500)),
  );
}
const reference = await microsPerCall(() => readAllReference(perEvent), 200);
const now = await microsPerCall(() => readAll(perEvent), 200);
console.log(row("bounded reads", `${perEvent.length} chunks`, reference, now));
for (const [input, chunks] of [["one event a chunk", perEvent], ["one chunk", whole]] as const) {
  if (await relayReference(chunks) !== await relay(chunks)) {
    throw new Error("the two relays send different bytes");
  }
  const label = `${perEvent.length} events, ${input}`;
  const reference = await microsPerCall(() => relayReference(chunks), 200);
  console.log(
    row("relayed without usage", label, reference, await microsPerCall(() => relay(chunks), 200)),
  );
}

import type { ChunkRewrite } from "./observed_body.ts";
import { SseLines } from "./sse_lines.ts";

/**
 * Takes the usage the router asked for out of an SSE stream: the final usage-only chunk
 * (`choices: []` with a `usage` object) is dropped with its blank separator line, a `usage` on a
 * content chunk is removed, and the `"usage":null` OpenAI puts on every chunk is deleted. Other
 * lines pass byte for byte; only a line not yet ended is held back. Runs inside the relayed body's
 * own pull (src/proxy/observed_body.ts).
 */
export class UsageChunkFilter implements ChunkRewrite {
  readonly #decoder = new TextDecoder();
  readonly #encoder = new TextEncoder();
  readonly #lines = new UsageLineFilter();
  /** No partial character is held in the decoder (the last chunk ended on an ASCII byte). */
  #decoderClear = true;

  push(chunk: Uint8Array): Uint8Array | undefined {
    if (chunk.byteLength === 0) return undefined;
    const last = chunk[chunk.byteLength - 1];
    // Most chunks are whole events without usage: they go on as the engine's own bytes. A small
    // one is searched as bytes, not decoded (an ASCII key cannot hide inside a multibyte
    // character); a large one is decoded and searched natively, which is faster there
    // (`deno task bench:stream`).
    const whole = this.#decoderClear && this.#lines.idle && last === NEWLINE;
    if (whole && chunk.byteLength <= BYTE_SEARCH_MAX && !hasUsageKey(chunk)) return chunk;
    const text = this.#decoder.decode(chunk, { stream: true });
    this.#decoderClear = last < 0x80;
    if (whole && !text.includes('"usage"')) return chunk;
    const out = this.#lines.push(text);
    return out ? this.#encoder.encode(out) : undefined;
  }

  end(): Uint8Array | undefined {
    const out = this.#lines.end(this.#decoder.decode());
    return out ? this.#encoder.encode(out) : undefined;
  }
}

/** Chunks up to this size are searched for the usage key as bytes. */
const BYTE_SEARCH_MAX = 2048;

/** The bytes of `"usage"`. */
const USAGE_KEY = new TextEncoder().encode('"usage"');

function hasUsageKey(bytes: Uint8Array): boolean {
  for (
    let at = bytes.indexOf(USAGE_KEY[1], 1);
    at !== -1;
    at = bytes.indexOf(USAGE_KEY[1], at + 1)
  ) {
    if (bytes[at - 1] !== USAGE_KEY[0]) continue;
    let i = 2;
    while (i < USAGE_KEY.length && bytes[at - 1 + i] === USAGE_KEY[i]) i++;
    if (i === USAGE_KEY.length) return true;
  }
  return false;
}

const NEWLINE = 0x0a;

/**
 * The filter's line state over SseLines: a line longer than MAX_SSE_LINE_CHARS is no usage event
 * and goes on unfiltered instead of being held whole.
 */
export class UsageLineFilter {
  #out = "";
  #dropBlank = false;
  readonly #lines = new SseLines(
    (line) => this.#out += this.#line(line),
    (text) => this.#out += text,
  );

  get idle(): boolean {
    return this.#lines.idle && !this.#dropBlank;
  }

  push(text: string): string {
    this.#lines.push(text);
    const out = this.#out;
    this.#out = "";
    return out;
  }

  /** The last text, and the last line even without its newline. */
  end(text: string): string {
    const out = this.push(text);
    const last = this.#lines.takeLast();
    return out + (last ? filterLine(last) ?? "" : "");
  }

  #line(line: string): string {
    const blank = line === "" || line === "\r";
    if (this.#dropBlank && blank) {
      this.#dropBlank = false;
      return "";
    }
    this.#dropBlank = false;
    const kept = filterLine(line);
    if (kept !== undefined) return kept + "\n";
    this.#dropBlank = true;
    return "";
  }
}

const NULL_USAGE = /,\s*"usage"\s*:\s*null(?=\s*[,}])|"usage"\s*:\s*null\s*,/;

/** The line as the client should see it; undefined to drop it (a usage-only event). */
function filterLine(line: string): string | undefined {
  if (!line.startsWith("data:") || !line.includes('"usage"')) return line;
  if (NULL_USAGE.test(line)) return line.replace(NULL_USAGE, "");
  let event: Record<string, unknown>;
  try {
    event = JSON.parse(line.slice(5));
  } catch {
    return line;
  }
  if (!event || typeof event !== "object" || !("usage" in event)) return line;
  if (Array.isArray(event.choices) && event.choices.length === 0) return undefined;
  const { usage: _usage, ...rest } = event;
  return `data: ${JSON.stringify(rest)}${line.endsWith("\r") ? "\r" : ""}`;
}

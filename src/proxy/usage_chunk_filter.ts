import { SseLines } from "./sse_lines.ts";

/**
 * Takes the usage the router asked for out of an SSE stream: the final usage-only chunk
 * (`choices: []` with a `usage` object) is dropped with its blank separator line, a `usage` on a
 * content chunk is removed, and the `"usage":null` OpenAI puts on every chunk is deleted. Other
 * lines pass byte for byte; only a line not yet ended is held back.
 */
export function usageChunkFilter(): TransformStream<Uint8Array, Uint8Array> {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  const lines = new UsageLineFilter();
  /** No partial character is held in the decoder (the last chunk ended on an ASCII byte). */
  let decoderClear = true;
  return new TransformStream({
    transform(chunk, controller) {
      if (chunk.byteLength === 0) return;
      const text = decoder.decode(chunk, { stream: true });
      // Most chunks are whole events without usage: they go on as the engine's own bytes.
      const untouched = decoderClear && lines.idle && chunk[chunk.byteLength - 1] === NEWLINE &&
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

const NEWLINE = 0x0a;

/**
 * The filter's line state over SseLines: a line longer than MAX_SSE_LINE_CHARS is no usage event
 * and goes on unfiltered instead of being held whole.
 */
class UsageLineFilter {
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

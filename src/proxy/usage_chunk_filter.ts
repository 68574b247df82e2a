import { MAX_SSE_LINE_CHARS } from "./usage_sniffer.ts";

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
 * The filter's line state. Only new text is searched for line ends; a line longer than
 * MAX_SSE_LINE_CHARS is no usage event: it goes on unfiltered instead of being held whole.
 */
class UsageLineFilter {
  #pending = "";
  #dropBlank = false;
  /** The current line outgrew the limit: pass it on up to its newline. */
  #passing = false;

  get idle(): boolean {
    return this.#pending === "" && !this.#dropBlank && !this.#passing;
  }

  push(text: string): string {
    let out = "";
    let start = 0;
    for (let end = text.indexOf("\n"); end >= 0; end = text.indexOf("\n", start)) {
      const piece = text.slice(start, end);
      start = end + 1;
      if (this.#passing) out += piece + "\n";
      else out += this.#line(this.#pending + piece);
      this.#pending = "";
      this.#passing = false;
    }
    const rest = text.slice(start);
    if (this.#passing) return out + rest;
    this.#pending += rest;
    if (this.#pending.length > MAX_SSE_LINE_CHARS) {
      out += this.#pending;
      this.#pending = "";
      this.#passing = true;
    }
    return out;
  }

  /** The last text, and the last line even without its newline. */
  end(text: string): string {
    const out = this.push(text);
    const last = this.#passing ? "" : this.#pending;
    this.#pending = "";
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

/**
 * Takes the usage the router asked for out of an SSE stream: the final usage-only chunk
 * (`choices: []` with a `usage` object) is dropped with its blank separator line, a `usage` on a
 * content chunk is removed, and the `"usage":null` OpenAI puts on every chunk is deleted. Other
 * lines pass byte for byte; only a line not yet ended is held back.
 */
export function usageChunkFilter(): TransformStream<Uint8Array, Uint8Array> {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let pending = "";
  let dropBlank = false;
  const filterLines = (text: string): string => {
    let out = "";
    let start = 0;
    for (let end = text.indexOf("\n"); end >= 0; end = text.indexOf("\n", start)) {
      const line = text.slice(start, end);
      start = end + 1;
      if (dropBlank && (line === "" || line === "\r")) {
        dropBlank = false;
        continue;
      }
      dropBlank = false;
      const kept = filterLine(line);
      if (kept === undefined) dropBlank = true;
      else out += kept + "\n";
    }
    pending = text.slice(start);
    return out;
  };
  return new TransformStream({
    transform(chunk, controller) {
      const out = filterLines(pending + decoder.decode(chunk, { stream: true }));
      if (out) controller.enqueue(encoder.encode(out));
    },
    flush(controller) {
      const rest = filterLines(pending + decoder.decode());
      const tail = rest + (pending ? filterLine(pending) ?? "" : "");
      if (tail) controller.enqueue(encoder.encode(tail));
    },
  });
}

const NULL_USAGE = /,\s*"usage"\s*:\s*null(?=\s*[,}])|"usage"\s*:\s*null\s*,/;

/** The line as the client should see it; undefined to drop it (a usage-only event). */
export function filterLine(line: string): string | undefined {
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

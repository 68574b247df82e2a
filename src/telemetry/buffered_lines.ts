/**
 * Log lines gathered and written together: one write per event-loop turn instead of one
 * `console.error` per line. The access log writes a line per request, and through a pipe each
 * write cost about 70 µs of the router's CPU at saturation (`deno task bench:overhead --profile`).
 * An urgent line (a warning or an error) is written at once, after every line before it, so a
 * crash loses at most the `info` lines of its last turn.
 */
export interface LineSink {
  write(line: string, urgent: boolean): void;
  /** Writes what is buffered now. */
  flush(): void;
}

/** Buffered lines waiting longer than this many bytes are written without waiting for the turn. */
const MAX_BUFFERED_BYTES = 64 * 1024;

export function bufferedLines(
  writeBytes: (bytes: Uint8Array) => void,
  schedule: (flush: () => void) => void,
): LineSink {
  const encoder = new TextEncoder();
  let pending: string[] = [];
  let pendingLength = 0;
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending.length === 0) return;
    const text = pending.join("\n") + "\n";
    pending = [];
    pendingLength = 0;
    writeBytes(encoder.encode(text));
  };
  return {
    flush,
    write(line, urgent) {
      pending.push(line);
      pendingLength += line.length + 1;
      if (urgent || pendingLength > MAX_BUFFERED_BYTES) return flush();
      if (!scheduled) {
        scheduled = true;
        schedule(flush);
      }
    },
  };
}

/**
 * Standard error through `bufferedLines`, flushed after each turn, when the process exits and when
 * an uncaught error is about to end it (the listeners only flush: the error still ends it).
 */
export function bufferedStderr(): LineSink {
  const sink = bufferedLines(writeAll, (flush) => {
    const timer = setTimeout(flush, 0);
    Deno.unrefTimer(timer);
  });
  for (const event of ["unload", "error", "unhandledrejection"]) {
    globalThis.addEventListener(event, () => sink.flush());
  }
  return sink;
}

function writeAll(bytes: Uint8Array): void {
  let written = 0;
  while (written < bytes.length) written += Deno.stderr.writeSync(bytes.subarray(written));
}

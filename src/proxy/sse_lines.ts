/** A longer SSE line is not an event worth reading: it is never buffered whole. */
export const MAX_SSE_LINE_CHARS = 1024 * 1024;

/**
 * Streamed text cut into lines, for readers of SSE. Only new text is searched for line ends
 * (linear in the stream, however long a line), and a line longer than MAX_SSE_LINE_CHARS is
 * not held: its text goes to `overlong` as it comes (to pass on or to drop), up to its newline.
 */
export class SseLines {
  #pending = "";
  /** The current line outgrew the limit: its text goes to `overlong` up to its newline. */
  #overlong = false;

  /** `line` gets each line and where its newline is in the pushed text. */
  constructor(
    private readonly line: (line: string, newlineAt: number) => void,
    private readonly overlong: (text: string) => void = () => {},
  ) {}

  /** Nothing held back and no overlong line under way. */
  get idle(): boolean {
    return this.#pending === "" && !this.#overlong;
  }

  /** Characters held for a line not yet ended (at most MAX_SSE_LINE_CHARS). */
  get bufferedChars(): number {
    return this.#pending.length;
  }

  push(text: string): void {
    let start = 0;
    for (let end = text.indexOf("\n"); end >= 0; end = text.indexOf("\n", start)) {
      const piece = text.slice(start, end);
      start = end + 1;
      if (this.#overlong) this.overlong(piece + "\n");
      else this.line(this.#pending + piece, end);
      this.#pending = "";
      this.#overlong = false;
    }
    const rest = text.slice(start);
    if (this.#overlong) return this.overlong(rest);
    this.#pending += rest;
    if (this.#pending.length <= MAX_SSE_LINE_CHARS) return;
    this.overlong(this.#pending);
    this.#pending = "";
    this.#overlong = true;
  }

  /** The last line, held without its newline (empty when none or overlong); the state clears. */
  takeLast(): string {
    const last = this.#pending;
    this.#pending = "";
    this.#overlong = false;
    return last;
  }
}

/**
 * The pre-tokenizer's split of a byte-level BPE tokenizer, done in JavaScript with the very RegExp
 * `@huggingface/tokenizers` builds for it (its Oniguruma-to-JavaScript rewrite included), so the
 * pieces are the exact path's pieces. BPE never merges across two pieces: a piece's ids depend on
 * the piece alone, which is what makes them cacheable (piece_cache.ts).
 */
import { ByteLevelPreTokenizer, SplitPreTokenizer } from "@huggingface/tokenizers";

type Json = Record<string, unknown>;

/**
 * The RegExp (flags `gu`) the library splits with, for the pre-tokenizers the fast path accepts:
 * ByteLevel with its own regex, or Split (Isolated) followed by ByteLevel without one.
 */
export function pieceRegex(preTokenizer: unknown): RegExp | undefined {
  const p = preTokenizer as Json | null | undefined;
  if (p?.type === "ByteLevel" && p.use_regex !== false) {
    // deno-lint-ignore no-explicit-any
    return new ByteLevelPreTokenizer(p as any).pattern;
  }
  if (p?.type !== "Sequence" || !Array.isArray(p.pretokenizers)) return undefined;
  const [split, byteLevel, ...rest] = p.pretokenizers as Json[];
  if (rest.length > 0 || split?.type !== "Split" || byteLevel?.type !== "ByteLevel") {
    return undefined;
  }
  if (byteLevel.use_regex !== false || split.behavior !== "Isolated" || split.invert) {
    return undefined;
  }
  // deno-lint-ignore no-explicit-any
  return new SplitPreTokenizer(split as any).pattern ?? undefined;
}

/**
 * Fills `out` with the pieces of `text`: every match of `regex`, and any text between matches as
 * a piece of its own (the library's `Isolated` split). Empty matches are skipped. Returns `out`.
 */
export function splitPieces(text: string, regex: RegExp, out: string[]): string[] {
  out.length = 0;
  regex.lastIndex = 0;
  let previous = 0;
  let match: RegExpExecArray | null;
  while ((match = regex.exec(text)) !== null) {
    const piece = match[0];
    if (match.index > previous) out.push(text.slice(previous, match.index));
    if (piece.length > 0) out.push(piece);
    else regex.lastIndex = match.index + ((text.codePointAt(match.index) ?? 0) > 0xffff ? 2 : 1);
    previous = match.index + piece.length;
  }
  if (previous < text.length) out.push(text.slice(previous));
  return out;
}

/**
 * Splits text on added tokens (`<|im_start|>`, `<think>`...) the way Hugging Face tokenizers do
 * before normalization and pre-tokenization: at each position the longest added token starting
 * there wins, scanning left to right. The text between two matches is a segment whose ids do not
 * depend on its neighbours, which is what makes per-segment caching exact.
 */

/** A piece of split text: a plain segment (string) or an added token's id (number). */
export type SplitPart = string | number;

interface TrieNode {
  next: Map<number, TrieNode>;
  id: number;
  length: number;
}

function newNode(): TrieNode {
  return { next: new Map(), id: -1, length: 0 };
}

export class AddedTokenSplitter {
  readonly #root = newNode();
  readonly #firstUnits = new Uint8Array(65536);
  /** The distinct first characters when there are few (`<` for most models): found by indexOf. */
  readonly #firstChars: string[];
  readonly size: number;

  constructor(tokens: Iterable<{ content: string; id: number }>) {
    let size = 0;
    for (const { content, id } of tokens) {
      if (content.length === 0) continue;
      let node = this.#root;
      for (let i = 0; i < content.length; i++) {
        const unit = content.charCodeAt(i);
        let child = node.next.get(unit);
        if (!child) {
          child = newNode();
          node.next.set(unit, child);
        }
        node = child;
      }
      node.id = id;
      node.length = content.length;
      this.#firstUnits[content.charCodeAt(0)] = 1;
      size++;
    }
    this.size = size;
    const firsts: string[] = [];
    for (let unit = 0; unit < 65536 && firsts.length <= 4; unit++) {
      if (this.#firstUnits[unit]) firsts.push(String.fromCharCode(unit));
    }
    this.#firstChars = firsts.length <= 4 ? firsts : [];
  }

  /** Segments and added-token ids in text order; empty segments are dropped. */
  split(text: string): SplitPart[] {
    const parts: SplitPart[] = [];
    if (this.size === 0) {
      if (text.length > 0) parts.push(text);
      return parts;
    }
    const first = this.#firstUnits;
    const n = text.length;
    let start = 0;
    let i = 0;
    const jump = this.#firstChars;
    while (i < n) {
      if (jump.length > 0) {
        let next = n;
        for (const c of jump) {
          const at = text.indexOf(c, i);
          if (at >= 0 && at < next) next = at;
        }
        if (next === n) break;
        i = next;
      } else if (first[text.charCodeAt(i)] === 0) {
        i++;
        continue;
      }
      let node: TrieNode | undefined = this.#root;
      let matchId = -1;
      let matchLength = 0;
      for (let j = i; j < n; j++) {
        node = node.next.get(text.charCodeAt(j));
        if (!node) break;
        if (node.id >= 0) {
          matchId = node.id;
          matchLength = node.length;
        }
      }
      if (matchId < 0) {
        i++;
        continue;
      }
      if (i > start) parts.push(text.slice(start, i));
      parts.push(matchId);
      i += matchLength;
      start = i;
    }
    if (start < n) parts.push(text.slice(start));
    return parts;
  }
}

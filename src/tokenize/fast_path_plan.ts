/**
 * Decides, once at load, whether a tokenizer.json can be encoded by tiktoken (WASM) with exactly
 * the ids Hugging Face tokenizers give, and prepares tiktoken's inputs when it can. Pure: no I/O.
 *
 * tiktoken runs byte-level BPE by "merge the adjacent pair whose concatenation has the lowest
 * rank" and returns a whole pre-tokenized piece directly when it is in the vocabulary; Hugging Face
 * BPE merges the adjacent pair listed first in `merges` and (unless `ignore_merges`) always runs the
 * merges. The checks below make those two procedures agree, using token ids as ranks.
 */
import { BYTE_TO_CHAR, byteLevelTokenBase64, isByteLevelToken } from "./byte_level.ts";

/** GPT-2's pattern, used by a ByteLevel pre-tokenizer with `use_regex: true`. */
const GPT2_PATTERN =
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

export interface FastPathPlan {
  /** The pre-tokenizer regex, in the syntax tiktoken (fancy-regex) and Oniguruma share. */
  pattern: string;
  /** Apply NFC before encoding (the normalizer says so). */
  nfc: boolean;
  /** tiktoken's mergeable ranks, one `base64(bytes) rank` line per token, rank = token id. */
  bpeRanks: string;
  /** Vocabulary entries left out because Hugging Face can never produce them. */
  excludedTokens: number;
  ignoreMerges: boolean;
  /** Strings x+y+z where overlapping merges of one token tie differently (see the probe). */
  tieHazards: string[];
}

export type FastPathDecision = { ok: true; plan: FastPathPlan } | { ok: false; reason: string };

type Json = Record<string, unknown>;

const no = (reason: string): FastPathDecision => ({ ok: false, reason });

function normalizerUsesNfc(normalizer: unknown): boolean | undefined {
  if (normalizer === null || normalizer === undefined) return false;
  const n = normalizer as Json;
  if (n.type === "NFC") return true;
  if (n.type === "Sequence" && Array.isArray(n.normalizers)) {
    let nfc = false;
    for (const inner of n.normalizers as Json[]) {
      if (inner.type !== "NFC" || nfc) return undefined;
      nfc = true;
    }
    return nfc;
  }
  return undefined;
}

function preTokenizerPattern(pre: unknown): string | FastPathDecision {
  if (!pre) return no("no pre-tokenizer: byte-level BPE needs a ByteLevel pre-tokenizer");
  const p = pre as Json;
  if (p.type === "ByteLevel") {
    if (p.add_prefix_space) return no("ByteLevel pre-tokenizer adds a prefix space");
    if (p.use_regex === false) return no("ByteLevel pre-tokenizer without a split regex");
    return GPT2_PATTERN;
  }
  if (p.type !== "Sequence" || !Array.isArray(p.pretokenizers)) {
    return no(`pre-tokenizer ${String(p.type)} is not Split + ByteLevel`);
  }
  const steps = p.pretokenizers as Json[];
  const splits = steps.filter((s) => s.type === "Split");
  const byteLevel = steps.filter((s) => s.type === "ByteLevel");
  if (
    steps.length !== 2 || splits.length !== 1 || byteLevel.length !== 1 || steps[1] !== byteLevel[0]
  ) {
    return no(
      `pre-tokenizer sequence [${steps.map((s) => s.type).join(", ")}] is not [Split, ByteLevel]`,
    );
  }
  const split = splits[0];
  const bl = byteLevel[0];
  if (bl.add_prefix_space) return no("ByteLevel pre-tokenizer adds a prefix space");
  if (bl.use_regex !== false) return no("ByteLevel after Split also splits with its own regex");
  const regex = (split.pattern as Json | undefined)?.Regex;
  if (typeof regex !== "string") return no("Split pre-tokenizer pattern is not a Regex");
  if (split.behavior !== "Isolated" || split.invert) {
    return no(
      `Split behaviour ${String(split.behavior)}${
        split.invert ? " (inverted)" : ""
      } is not Isolated`,
    );
  }
  return regex;
}

export interface FastPathPlanOptions {
  /**
   * Also run tiktoken's merge procedure on every vocabulary token and compare (1-2 s more for a
   * 150k vocabulary). The test suite does it for the shipped tokenizers; the load-time probe
   * covers the rest.
   */
  verifyEveryToken?: boolean;
}

export function planFastPath(
  tokenizerJson: Json,
  options: FastPathPlanOptions = {},
): FastPathDecision {
  const model = (tokenizerJson.model ?? {}) as Json;
  const modelReason = unsupportedModel(model);
  if (modelReason !== undefined) return no(modelReason);
  const nfc = normalizerUsesNfc(tokenizerJson.normalizer);
  if (nfc === undefined) return no("normalizer other than NFC");
  const pattern = preTokenizerPattern(tokenizerJson.pre_tokenizer);
  if (typeof pattern !== "string") return pattern;
  const addedReason = unsupportedAddedToken((tokenizerJson.added_tokens ?? []) as Json[]);
  if (addedReason !== undefined) return no(addedReason);
  const ignoreMerges = model.ignore_merges === true;

  const vocab = readVocabulary(model.vocab as Record<string, number>);
  if (typeof vocab === "string") return no(vocab);
  const merges = readMerges(model.merges as (string | [string, string])[], vocab.ids);
  if (typeof merges === "string") return no(merges);
  const tieHazards = findTieHazards(vocab, merges);
  const verify = options.verifyEveryToken === true;
  const selection = selectTokens(vocab, merges, ignoreMerges, verify);
  if (typeof selection === "string") return no(selection);
  const disagreement = mergeDisagreement(vocab, merges, selection, ignoreMerges, verify);
  if (disagreement !== undefined) return no(disagreement);

  return {
    ok: true,
    plan: {
      pattern,
      nfc,
      bpeRanks: bpeRanksText(vocab.tokens, selection.included),
      excludedTokens: vocab.excluded + selection.excluded,
      ignoreMerges,
      tieHazards,
    },
  };
}

/** Byte-level tokens of the vocabulary, both ways. */
interface Vocabulary {
  ids: Map<string, number>;
  /** id -> token string (holes where a token is not byte-level). */
  tokens: string[];
  /** Entries that are not byte-level: BPE over byte-level characters never produces them. */
  excluded: number;
}

interface Merges {
  /** left -> right -> merge index */
  mergeRank: Map<number, Map<number, number>>;
  /** merge index -> token id */
  mergeResult: number[];
  /** token id -> the pairs that merge into it */
  mergesOf: Map<number, [number, number][]>;
}

/** The tokens tiktoken gets, and the pairs it may merge beyond the registered merges. */
interface TokenSelection {
  included: Uint8Array;
  /** Characters of every included multi-character token, as token ids. */
  charIds: number[][];
  /** left -> right -> token id, for every split of a token (filled only when verifying). */
  concat: Map<number, Map<number, number>>;
  /** Tokens left out beyond the vocabulary's own exclusions. */
  excluded: number;
}

/** Why the model is not a plain byte-level BPE, if it is not. */
function unsupportedModel(model: Json): string | undefined {
  if (model.type !== undefined && model.type !== "BPE") {
    return `model ${String(model.type)} is not BPE`;
  }
  if (!model.vocab || !Array.isArray(model.merges)) return "BPE model without vocab/merges";
  if (model.byte_fallback) return "BPE with byte_fallback (SentencePiece style)";
  if (model.dropout) return "BPE dropout is set";
  if (model.continuing_subword_prefix || model.end_of_word_suffix) {
    return "BPE with a subword prefix/suffix";
  }
  return undefined;
}

function unsupportedAddedToken(addedTokens: readonly Json[]): string | undefined {
  for (const t of addedTokens) {
    if (t.lstrip || t.rstrip || t.single_word) {
      return `added token ${String(t.content)} strips whitespace or matches single words only`;
    }
  }
  return undefined;
}

/** The byte-level vocabulary, or why it cannot be used. */
function readVocabulary(vocab: Record<string, number>): Vocabulary | string {
  const ids = new Map<string, number>();
  const tokens: string[] = [];
  let excluded = 0;
  for (const [token, id] of Object.entries(vocab)) {
    if (!Number.isInteger(id) || id < 0 || id >= 2097152) return `token id ${id} out of range`;
    if (!isByteLevelToken(token)) {
      excluded++; // not byte-level: BPE over byte-level characters never produces it
      continue;
    }
    ids.set(token, id);
    tokens[id] = token;
  }
  for (let b = 0; b < 256; b++) {
    if (!ids.has(BYTE_TO_CHAR[b])) return `byte 0x${b.toString(16)} has no token`;
  }
  return { ids, tokens, excluded };
}

/** The merges by pair and by result; their rank order must follow token ids. */
function readMerges(
  merges: readonly (string | [string, string])[],
  ids: ReadonlyMap<string, number>,
): Merges | string {
  const mergeRank = new Map<number, Map<number, number>>();
  const mergeResult: number[] = [];
  const mergesOf = new Map<number, [number, number][]>();
  let previous = -1;
  for (let i = 0; i < merges.length; i++) {
    const m = merges[i];
    const [a, b] = Array.isArray(m) ? m : m.split(" ", 2);
    const ia = ids.get(a);
    const ib = ids.get(b);
    const it = ids.get(a + b);
    if (ia === undefined || ib === undefined || it === undefined) {
      return `merge ${i} (${a} ${b}) uses a token missing from the vocabulary`;
    }
    if (it < previous) return `merge ranks do not follow token ids (merge ${i}: ${a} ${b})`;
    previous = it;
    mergeResult[i] = it;
    let row = mergeRank.get(ia);
    if (!row) mergeRank.set(ia, row = new Map());
    if (!row.has(ib)) row.set(ib, i);
    const list = mergesOf.get(it);
    if (list) list.push([ia, ib]);
    else mergesOf.set(it, [[ia, ib]]);
  }
  return { mergeRank, mergeResult, mergesOf };
}

/**
 * Two merges of one token can overlap ([ab][a][ba]): tiktoken then takes the left pair, HF the
 * lower-ranked one. Their characters go into the load-time probe.
 */
function findTieHazards({ ids, tokens }: Vocabulary, { mergeRank, mergesOf }: Merges): string[] {
  const tieHazards: string[] = [];
  for (const [token, list] of mergesOf) {
    if (list.length < 2) continue;
    for (const [x, y] of list) {
      const rest = tokens[token].slice(tokens[y].length);
      const z = ids.get(rest);
      if (z === undefined || tokens[y] + rest !== tokens[token]) continue;
      const overlapRank = mergeRank.get(y)?.get(z);
      if (overlapRank !== undefined && overlapRank < mergeRank.get(x)!.get(y)!) {
        tieHazards.push(tokens[x] + tokens[y] + rest);
        break;
      }
    }
  }
  return tieHazards;
}

/**
 * Which tokens tiktoken may produce: single characters and tokens some merge yields. When
 * verifying, every split of a token into two tokens is a pair tiktoken may merge (registered or
 * not), collected into `concat`.
 */
function selectTokens(
  { ids, tokens }: Vocabulary,
  { mergesOf }: Merges,
  ignoreMerges: boolean,
  verify: boolean,
): TokenSelection | string {
  const concat = new Map<number, Map<number, number>>();
  const included = new Uint8Array(tokens.length);
  const charIds: number[][] = [];
  let excluded = 0;
  for (let id = 0; id < tokens.length; id++) {
    const token = tokens[id];
    if (token === undefined) continue;
    const chars = Array.from(token);
    if (chars.length === 1) {
      included[id] = 1;
      continue;
    }
    if (!mergesOf.has(id)) {
      if (ignoreMerges) return `token ${token} has no merge but a whole piece may match it`;
      excluded++; // unreachable in HF: tiktoken must not produce it either
      continue;
    }
    included[id] = 1;
    charIds[id] = chars.map((c) => ids.get(c)!);
    if (!verify || chars.length < 3) continue;
    let offset = 0;
    for (let i = 0; i < chars.length - 1; i++) {
      offset += chars[i].length;
      const left = ids.get(token.slice(0, offset));
      const right = ids.get(token.slice(offset));
      if (left === undefined || right === undefined) continue;
      let row = concat.get(left);
      if (!row) concat.set(left, row = new Map());
      row.set(right, id);
    }
  }
  return { included, charIds, concat, excluded };
}

/**
 * Token by token, both procedures must split the token's own bytes alike, and with merges
 * always applied (ignore_merges false) every token must be reachable. Says where they differ.
 */
function mergeDisagreement(
  { tokens }: Vocabulary,
  merges: Merges,
  { charIds, concat }: TokenSelection,
  ignoreMerges: boolean,
  verify: boolean,
): string | undefined {
  const hf: number[] = [];
  const tk: number[] = [];
  for (let id = 0; id < tokens.length; id++) {
    const start = charIds[id];
    if (start === undefined || start.length < 3) continue; // two characters: one pair, same result
    if (ignoreMerges && !verify) continue;
    mergeLikeHf(hf, start, merges);
    if (!ignoreMerges && (hf.length !== 1 || hf[0] !== id)) {
      return `token ${tokens[id]} is not reachable through merges (ignore_merges is false)`;
    }
    if (!verify) continue;
    mergeLikeTiktoken(tk, start, merges, concat);
    if (tk.length !== hf.length || tk.some((t, i) => t !== hf[i])) {
      return `tiktoken and merges split token ${tokens[id]} differently`;
    }
  }
  return undefined;
}

/** Hugging Face BPE on `start` into `out`: merge the lowest-indexed listed pair until none is left. */
function mergeLikeHf(out: number[], start: readonly number[], merges: Merges): void {
  const { mergeRank, mergeResult } = merges;
  out.length = 0;
  out.push(...start);
  while (out.length > 1) {
    let best = Infinity;
    let at = -1;
    for (let i = 0; i < out.length - 1; i++) {
      const r = mergeRank.get(out[i])?.get(out[i + 1]);
      if (r !== undefined && r < best) {
        best = r;
        at = i;
      }
    }
    if (at < 0) break;
    out.splice(at, 2, mergeResult[best]);
  }
}

/** tiktoken on `start` into `out`: merge the pair whose concatenation has the lowest id. */
function mergeLikeTiktoken(
  out: number[],
  start: readonly number[],
  merges: Merges,
  concat: ReadonlyMap<number, ReadonlyMap<number, number>>,
): void {
  const { mergeRank, mergeResult } = merges;
  out.length = 0;
  out.push(...start);
  while (out.length > 1) {
    let best = Infinity;
    let at = -1;
    for (let i = 0; i < out.length - 1; i++) {
      const m = mergeRank.get(out[i])?.get(out[i + 1]);
      const r = m !== undefined ? mergeResult[m] : concat.get(out[i])?.get(out[i + 1]);
      if (r !== undefined && r < best) {
        best = r;
        at = i;
      }
    }
    if (at < 0) break;
    out.splice(at, 2, best);
  }
}

/** tiktoken's mergeable ranks: `base64(bytes) id` per included token. */
function bpeRanksText(tokens: readonly string[], included: Uint8Array): string {
  const lines: string[] = [];
  for (let id = 0; id < tokens.length; id++) {
    if (included[id]) lines.push(`${byteLevelTokenBase64(tokens[id])} ${id}`);
  }
  return lines.join("\n") + "\n";
}

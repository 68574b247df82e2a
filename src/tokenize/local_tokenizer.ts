/**
 * A model's tokenizer, local and synchronous after load: `encode` (completions) and `encodeChat`
 * (chat template, then encode without special tokens), exactly as vLLM/SGLang do (docs/compat.md §1).
 *
 * Text is split on added tokens first (as Hugging Face does); each segment between them is
 * tokenized on its own, by the fast path (tiktoken WASM) when the vocabulary allows it, else by
 * `@huggingface/tokenizers`, and its ids are kept in a segment cache so a growing conversation only
 * tokenizes its new turn. On the fast path a segment is itself split into pre-tokenized pieces
 * whose ids are cached too, so a new conversation mostly looks its words up.
 */
import { Tokenizer } from "@huggingface/tokenizers";
import { AddedTokenSplitter } from "./added_token_splitter.ts";
import type { ChatFlavor, ContentFormat } from "./chat_messages.ts";
import { ChatTemplateRenderer, chatTemplateSources } from "./chat_template.ts";
import { TokenizeInputError, TokenizerLoadError } from "./errors.ts";
import {
  FastBpeEncoder,
  hasLongRun,
  newClassTable,
  type PieceEncoding,
} from "./fast_bpe_encoder.ts";
import { planFastPath } from "./fast_path_plan.ts";
import { fastPathProbeTexts } from "./fast_path_probe.ts";
import {
  DEFAULT_PIECE_CACHE_ENTRIES,
  DEFAULT_PIECE_MAX_CHARS,
  PieceCache,
  type PieceCacheStats,
} from "./piece_cache.ts";
import { pieceRegex } from "./pre_tokenizer_split.ts";
import {
  TokenSegmentCache,
  type TokenSegmentCacheScope,
  type TokenSegmentCacheStats,
} from "./segment_cache.ts";
import {
  resolveSpecialTokenFrame,
  type SpecialTokenFrame,
  tokenText,
} from "./special_token_frame.ts";
import type { ChatEncodeOptions, ChatMessage, EncodeOptions, PromptTokenizer } from "./types.ts";

/** The longest run of one character class the router tokenizes (~70 ms of BPE merges). */
export const MAX_RUN_CHARS = 20_000;

type Json = Record<string, unknown>;

/** The parsed files of a tokenizer directory. */
export interface TokenizerFiles {
  tokenizerJson: Json;
  /** tokenizer_config.json (with special_tokens_map.json's entries merged in), or {}. */
  tokenizerConfig: Json;
  /** chat_template.jinja, when the directory has one. */
  chatTemplateJinja?: string;
  /** Where the files came from (a directory), for messages and as the default cache scope. */
  source: string;
}

export interface LocalTokenizerOptions {
  /** Use tiktoken when the vocabulary allows it (default true). */
  fastPath?: boolean;
  /**
   * What to check before enabling the fast path: `probe` (default) encodes a built-in probe both
   * ways; `every-token` also replays both BPE procedures on every vocabulary token (~1-2 s more).
   */
  verifyFastPath?: "probe" | "every-token";
  /** A segment cache to use (possibly shared with other tokenizers); default: a private one. */
  cache?: TokenSegmentCache;
  /** Size of the private cache in tokens when `cache` is not given (default 4,000,000; 0 = none). */
  cacheMaxTokens?: number;
  /**
   * Pieces whose fast-path ids are cached (default 65,536; 0 = tiktoken splits and encodes whole
   * segments itself, as before the piece cache).
   */
  pieceCacheEntries?: number;
  /** Pieces longer than this are encoded every time (default 32 characters). */
  pieceMaxChars?: number;
  /** Name of this tokenizer's part of a shared cache (default: `files.source`). */
  cacheScope?: string;
  /** Which engine's chat request handling to reproduce (default vllm). */
  chatFlavor?: ChatFlavor;
  /** How templates receive message content (default auto, detected from the template as vLLM does). */
  contentFormat?: ContentFormat | "auto";
  /** Clock behind the templates' `strftime_now` (default: now). */
  clock?: () => Date;
}

export interface TokenizerInfo {
  source: string;
  /** Whether tiktoken encodes segments, and why (not). */
  fastPath: boolean;
  reason: string;
  /** Whether text is split on added tokens and cached per segment, and why (not). */
  segmentCache: boolean;
  segmentReason: string;
  /** Ids `addSpecialTokens` wraps around a text; null when the library adds them itself. */
  specialTokens: SpecialTokenFrame | null;
  chatTemplates: string[];
  /** How `message.content` reaches the default template (null without a template). */
  contentFormat: ContentFormat | null;
  chatFlavor: ChatFlavor;
  loadMs: number;
}

export interface TokenizerStats {
  encodeCalls: number;
  /** Segments actually tokenized (cache misses), with their characters and tokens. */
  segmentsEncoded: number;
  charsEncoded: number;
  tokensEncoded: number;
  fastSegments: number;
  exactSegments: number;
  /** Segments sent to the exact path because they hold a very long run of one character class. */
  longRunFallbacks: number;
  cache: TokenSegmentCacheStats | null;
  /** Ids per pre-tokenized piece on the fast path (null without it). */
  pieceCache: PieceCacheStats | null;
}

const DEFAULT_CACHE_TOKENS = 4_000_000;

/** transformers' `special_tokens_map`: the special tokens a template sees as variables. */
function specialTokenVariables(config: Json): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (
    const key of [
      "bos_token",
      "eos_token",
      "unk_token",
      "sep_token",
      "pad_token",
      "cls_token",
      "mask_token",
    ]
  ) {
    const text = tokenText(config[key]);
    if (text !== undefined) out[key] = text;
  }
  if (Array.isArray(config.additional_special_tokens)) {
    out.additional_special_tokens = config.additional_special_tokens.map((t) => tokenText(t) ?? t);
  }
  return out;
}

/** Why per-segment encoding would not reproduce the library's whole-text encoding, if it would not. */
function segmentationProblem(tokenizerJson: Json): string | undefined {
  for (const t of (tokenizerJson.added_tokens ?? []) as Json[]) {
    if (t.lstrip || t.rstrip) {
      return `added token ${String(t.content)} strips the whitespace around it`;
    }
  }
  const stack: unknown[] = [tokenizerJson.pre_tokenizer];
  while (stack.length > 0) {
    const p = stack.pop() as Json | null | undefined;
    if (!p) continue;
    if (p.type === "Metaspace" && p.prepend_scheme === "first") {
      return "Metaspace pre-tokenizer prepends only to the first segment";
    }
    if (Array.isArray(p.pretokenizers)) stack.push(...p.pretokenizers);
  }
  return undefined;
}

function asIdArray(ids: ArrayLike<number>): Uint32Array {
  return ids instanceof Uint32Array ? ids : Uint32Array.from(ids);
}

export class LoadedTokenizer implements PromptTokenizer {
  readonly info: TokenizerInfo;
  readonly #hf: Tokenizer;
  readonly #splitter: AddedTokenSplitter | undefined;
  readonly #normalizedSplitter: AddedTokenSplitter;
  readonly #fast: FastBpeEncoder | undefined;
  readonly #frame: SpecialTokenFrame | undefined;
  /** This tokenizer's scope of `#sharedCache` (both unset when segments are not cached). */
  readonly #cache: TokenSegmentCacheScope | undefined;
  readonly #classes = newClassTable();
  readonly #sharedCache: TokenSegmentCache | undefined;
  readonly #renderer: ChatTemplateRenderer;
  readonly #stats = {
    encodeCalls: 0,
    segmentsEncoded: 0,
    charsEncoded: 0,
    tokensEncoded: 0,
    fastSegments: 0,
    exactSegments: 0,
    longRunFallbacks: 0,
  };

  /** Use `createLocalTokenizer` or `loadTokenizer`. */
  constructor(parts: {
    hf: Tokenizer;
    splitter: AddedTokenSplitter | undefined;
    normalizedSplitter: AddedTokenSplitter;
    fast: FastBpeEncoder | undefined;
    frame: SpecialTokenFrame | undefined;
    cache: TokenSegmentCache | undefined;
    cacheScope: string;
    renderer: ChatTemplateRenderer;
    info: TokenizerInfo;
  }) {
    this.#hf = parts.hf;
    this.#splitter = parts.splitter;
    this.#normalizedSplitter = parts.normalizedSplitter;
    this.#fast = parts.fast;
    this.#frame = parts.frame;
    this.#renderer = parts.renderer;
    this.info = parts.info;
    if (parts.cache && parts.splitter) {
      this.#sharedCache = parts.cache;
      this.#cache = parts.cache.scope(parts.cacheScope);
    }
  }

  /** Token ids of a completions prompt (`add_special_tokens` defaults to true, as in vLLM). */
  encode(text: string, options: EncodeOptions = {}): number[] {
    this.#stats.encodeCalls++;
    const addSpecialTokens = options.addSpecialTokens ?? true;
    if (!this.#splitter || (addSpecialTokens && !this.#frame)) {
      return this.#countExact(
        this.#hf.encode(text, { add_special_tokens: addSpecialTokens }).ids,
        text,
      );
    }
    const parts = this.#splitter.split(text);
    const pieces: (number | Uint32Array)[] = new Array(parts.length);
    let total = 0;
    for (let p = 0; p < parts.length; p++) {
      const part = parts[p];
      const piece = typeof part === "number" ? part : this.#segmentIds(part);
      pieces[p] = piece;
      total += typeof piece === "number" ? 1 : piece.length;
    }
    const prefix = addSpecialTokens ? this.#frame!.prefix : [];
    const suffix = addSpecialTokens ? this.#frame!.suffix : [];
    const out: number[] = new Array(prefix.length + total + suffix.length);
    let k = 0;
    for (const id of prefix) out[k++] = id;
    for (const piece of pieces) {
      if (typeof piece === "number") out[k++] = piece;
      else for (let i = 0; i < piece.length; i++) out[k++] = piece[i];
    }
    for (const id of suffix) out[k++] = id;
    return out;
  }

  /** The chat template's output for these messages (what `encodeChat` tokenizes). */
  renderChat(messages: ChatMessage[], options: ChatEncodeOptions = {}): string {
    return this.#renderer.render(messages, options);
  }

  /** Token ids of a chat request: render the template, then encode without special tokens. */
  encodeChat(messages: ChatMessage[], options: ChatEncodeOptions = {}): number[] {
    return this.encode(this.renderChat(messages, options), { addSpecialTokens: false });
  }

  /** Text of ids, for debugging (keys the router computes can be traced back to text). */
  decode(ids: number[]): string {
    return ids.length === 0 ? "" : this.#hf.decode(ids, { skip_special_tokens: false });
  }

  stats(): TokenizerStats {
    return {
      ...this.#stats,
      cache: this.#sharedCache?.stats() ?? null,
      pieceCache: this.#fast?.pieceCache?.stats() ?? null,
    };
  }

  /** Frees the WASM encoder; encoding afterwards is an error. */
  dispose(): void {
    this.#fast?.dispose();
  }

  #countExact(ids: number[], text: string): number[] {
    this.#stats.segmentsEncoded++;
    this.#stats.exactSegments++;
    this.#stats.charsEncoded += text.length;
    this.#stats.tokensEncoded += ids.length;
    return ids;
  }

  #segmentIds(segment: string): Uint32Array {
    const cached = this.#cache?.get(segment);
    if (cached) return cached;
    const ids = this.encodeSegment(segment);
    this.#cache?.set(segment, ids);
    return ids;
  }

  /** Ids of one segment (text without added tokens), bypassing the cache. */
  encodeSegment(segment: string): Uint32Array {
    this.#refuseCostlyRun(segment);
    this.#stats.segmentsEncoded++;
    this.#stats.charsEncoded += segment.length;
    let ids: Uint32Array | undefined;
    if (this.#fast) {
      ids = this.#fastSegment(segment);
      if (ids) this.#stats.fastSegments++;
      else this.#stats.longRunFallbacks++;
    }
    if (!ids) {
      ids = this.encodeSegmentExact(segment);
      this.#stats.exactSegments++;
    }
    this.#stats.tokensEncoded += ids.length;
    return ids;
  }

  /**
   * A run of one character class is one pre-tokenized piece, which BPE merges in superlinear time
   * (160k letters take a second, 4M would take minutes): beyond MAX_RUN_CHARS the request is not
   * tokenized here (TokenizeInputError: dispatched by load, the engine judges it).
   */
  #refuseCostlyRun(segment: string): void {
    if (segment.length < MAX_RUN_CHARS) return;
    if (!hasLongRun(segment, MAX_RUN_CHARS, this.#classes)) return;
    throw new TokenizeInputError(
      `The prompt holds a run of ${MAX_RUN_CHARS} or more characters of one kind (one "word"), ` +
        "too costly to tokenize in the router; it is dispatched by load.",
    );
  }

  /** Ids of one segment by `@huggingface/tokenizers` (the reference). */
  encodeSegmentExact(segment: string): Uint32Array {
    return asIdArray(this.#hf.encode(segment, { add_special_tokens: false }).ids);
  }

  #fastSegment(segment: string): Uint32Array | undefined {
    const fast = this.#fast!;
    const text = fast.normalize(segment);
    if (this.#normalizedSplitter.size === 0) return fast.encodeNormalized(text);
    const out: number[] = [];
    for (const part of this.#normalizedSplitter.split(text)) {
      if (typeof part === "number") out.push(part);
      else {
        const ids = fast.encodeNormalized(part);
        if (!ids) return undefined;
        for (let i = 0; i < ids.length; i++) out.push(ids[i]);
      }
    }
    return Uint32Array.from(out);
  }
}

/** Builds a tokenizer from parsed files (no I/O). */
export async function createLocalTokenizer(
  files: TokenizerFiles,
  options: LocalTokenizerOptions = {},
): Promise<LoadedTokenizer> {
  const started = performance.now();
  const { tokenizerJson, tokenizerConfig } = files;
  const addedTokens =
    (Array.isArray(tokenizerJson.added_tokens) ? tokenizerJson.added_tokens : []) as Json[];
  if (!tokenizerJson.model) {
    throw new TokenizerLoadError(
      `Cannot load tokenizer: ${files.source}/tokenizer.json has no "model"`,
    );
  }

  // split_special_tokens: special tokens typed in text are tokenized as text (transformers).
  const splitSpecial = tokenizerConfig.split_special_tokens === true;
  const matchable = addedTokens.filter((t) => !(splitSpecial && t.special));
  const hf = libraryTokenizer(files, splitSpecial ? matchable : undefined);
  const segmentProblem = segmentationProblem(tokenizerJson);
  const splitters = addedTokenSplitters(tokenizerJson, matchable, segmentProblem);
  const { splitter, normalizedSplitter } = splitters;
  const frame = checkedSpecialTokenFrame(files, hf, addedTokens);
  const renderer = templateRenderer(files, options);
  const { fast, reason } = await fastPathEncoder(
    hf,
    splitters,
    segmentProblem,
    tokenizerJson,
    options,
  );
  const cache = segmentCache(splitter, options);

  const info: TokenizerInfo = {
    source: files.source,
    fastPath: fast !== undefined,
    reason,
    segmentCache: cache !== undefined,
    segmentReason: segmentProblem ?? segmentCacheReason(cache),
    specialTokens: frame ?? null,
    chatTemplates: renderer.templateNames,
    contentFormat: renderer.templateNames.length > 0 ? safeContentFormat(renderer) : null,
    chatFlavor: options.chatFlavor ?? "vllm",
    loadMs: 0,
  };
  const tokenizer = new LoadedTokenizer({
    hf,
    splitter,
    normalizedSplitter,
    fast,
    frame,
    cache,
    cacheScope: options.cacheScope ?? files.source,
    renderer,
    info,
  });
  info.loadMs = Math.round(performance.now() - started);
  return tokenizer;
}

/** `@huggingface/tokenizers` on the files; `matchable` replaces the added tokens when given. */
function libraryTokenizer(files: TokenizerFiles, matchable: Json[] | undefined): Tokenizer {
  const { tokenizerJson, tokenizerConfig } = files;
  try {
    return new Tokenizer(
      matchable ? { ...tokenizerJson, added_tokens: matchable } : tokenizerJson,
      tokenizerConfig,
    );
  } catch (error) {
    throw new TokenizerLoadError(
      `Cannot load tokenizer: ${files.source}/tokenizer.json is not supported: ${
        (error as Error).message
      }`,
      { cause: error },
    );
  }
}

interface AddedTokenSplitters {
  splitter: AddedTokenSplitter | undefined;
  normalizedSplitter: AddedTokenSplitter;
}

/**
 * Which added tokens are matched on raw text, and which after normalization (as the library
 * does). No raw splitter when segments cannot be encoded on their own.
 */
function addedTokenSplitters(
  tokenizerJson: Json,
  matchable: readonly Json[],
  segmentProblem: string | undefined,
): AddedTokenSplitters {
  const hasNormalizer = tokenizerJson.normalizer !== null && tokenizerJson.normalizer !== undefined;
  const toEntry = (t: Json) => ({ content: t.content as string, id: t.id as number });
  const rawTokens = matchable.filter((t) => !(t.normalized && hasNormalizer)).map(toEntry);
  const normalizedTokens = matchable.filter((t) => t.normalized && hasNormalizer).map(toEntry);
  return {
    splitter: segmentProblem ? undefined : new AddedTokenSplitter(rawTokens),
    normalizedSplitter: new AddedTokenSplitter(normalizedTokens),
  };
}

/**
 * Special tokens around a completions prompt; a frame read from tokenizer.json is dropped when
 * the library, which can add it itself, disagrees on a probe.
 */
function checkedSpecialTokenFrame(
  files: TokenizerFiles,
  hf: Tokenizer,
  addedTokens: readonly Json[],
): SpecialTokenFrame | undefined {
  // Only the frame looks ids up (BOS/EOS at most): no vocabulary-sized map.
  const model = files.tokenizerJson.model as Json | undefined;
  const vocab = (model?.vocab ?? {}) as Record<string, number>;
  const addedIds = new Map(addedTokens.map((t) => [t.content as string, t.id as number]));
  const tokenToId = (token: string) =>
    addedIds.get(token) ?? (Object.hasOwn(vocab, token) ? vocab[token] : undefined);
  const result = resolveSpecialTokenFrame(files.tokenizerJson, files.tokenizerConfig, tokenToId);
  if (!result.ok) return undefined;
  const frame = result.frame;
  if (frame.source.startsWith("tokenizer.json") || frame.source === "no post_processor") {
    const probe = "Hello world";
    const expected = hf.encode(probe, { add_special_tokens: true }).ids;
    const inner = hf.encode(probe, { add_special_tokens: false }).ids;
    const framed = [...frame.prefix, ...inner, ...frame.suffix];
    if (framed.join() !== expected.join()) return undefined;
  }
  return frame;
}

function templateRenderer(
  files: TokenizerFiles,
  options: LocalTokenizerOptions,
): ChatTemplateRenderer {
  const sources = chatTemplateSources(files.tokenizerConfig, files.chatTemplateJinja);
  if (!sources.ok) {
    throw new TokenizerLoadError(`Cannot load tokenizer: ${files.source}: ${sources.reason}`);
  }
  try {
    return new ChatTemplateRenderer({
      sources: sources.sources,
      specialTokens: specialTokenVariables(files.tokenizerConfig),
      flavor: options.chatFlavor ?? "vllm",
      contentFormat: options.contentFormat ?? "auto",
      clock: options.clock ?? (() => new Date()),
    });
  } catch (error) {
    throw new TokenizerLoadError(
      `Cannot load tokenizer: ${files.source}: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
}

/** The tiktoken encoder when the plan allows it and the probe texts agree, and why (not). */
async function fastPathEncoder(
  hf: Tokenizer,
  { splitter, normalizedSplitter }: AddedTokenSplitters,
  segmentProblem: string | undefined,
  tokenizerJson: Json,
  options: LocalTokenizerOptions,
): Promise<{ fast: FastBpeEncoder | undefined; reason: string }> {
  if (options.fastPath === false) return { fast: undefined, reason: "disabled by configuration" };
  if (!splitter) {
    return {
      fast: undefined,
      reason: `text cannot be split on added tokens: ${segmentProblem}`,
    };
  }
  const decision = planFastPath(tokenizerJson, {
    verifyEveryToken: options.verifyFastPath === "every-token",
  });
  if (!decision.ok) return { fast: undefined, reason: decision.reason };
  let fast: FastBpeEncoder;
  try {
    fast = await FastBpeEncoder.create(decision.plan, pieceEncoding(tokenizerJson, options));
  } catch (error) {
    return {
      fast: undefined,
      reason: `tiktoken rejected the vocabulary or pattern: ${(error as Error).message}`,
    };
  }
  const probes = fastPathProbeTexts(decision.plan.tieHazards);
  const mismatch = probeMismatch(hf, splitter, normalizedSplitter, fast, probes);
  if (mismatch !== undefined) {
    fast.dispose();
    return {
      fast: undefined,
      reason: `probe text ${
        JSON.stringify(mismatch.slice(0, 40))
      } encodes differently on the fast path`,
    };
  }
  return {
    fast,
    reason: "byte-level BPE with merge ranks following token ids; probe texts match the exact path",
  };
}

/** How segments are split into cached pieces in JavaScript, unless the piece cache is off. */
function pieceEncoding(
  tokenizerJson: Json,
  options: LocalTokenizerOptions,
): PieceEncoding | undefined {
  const maxEntries = options.pieceCacheEntries ?? DEFAULT_PIECE_CACHE_ENTRIES;
  if (maxEntries <= 0) return undefined;
  const regex = pieceRegex(tokenizerJson.pre_tokenizer);
  if (!regex) return undefined;
  const maxPieceChars = options.pieceMaxChars ?? DEFAULT_PIECE_MAX_CHARS;
  return { regex, cache: new PieceCache({ maxEntries, maxPieceChars }) };
}

function segmentCacheReason(cache: TokenSegmentCache | undefined): string {
  return cache
    ? "segments between added tokens are tokenized independently"
    : "cache disabled by configuration";
}

/** The segment cache to use, when segments can be cached and the cache is not turned off. */
function segmentCache(
  splitter: AddedTokenSplitter | undefined,
  options: LocalTokenizerOptions,
): TokenSegmentCache | undefined {
  if (!splitter) return undefined;
  const maxTokens = options.cacheMaxTokens ?? DEFAULT_CACHE_TOKENS;
  return options.cache ?? (maxTokens > 0 ? new TokenSegmentCache({ maxTokens }) : undefined);
}

function safeContentFormat(renderer: ChatTemplateRenderer): ContentFormat | null {
  try {
    return renderer.contentFormat();
  } catch {
    return null;
  }
}

/** The first probe text whose fast-path ids differ from the library's whole-text ids. */
function probeMismatch(
  hf: Tokenizer,
  splitter: AddedTokenSplitter,
  normalizedSplitter: AddedTokenSplitter,
  fast: FastBpeEncoder,
  texts: string[],
): string | undefined {
  for (const text of texts) {
    const expected = hf.encode(text, { add_special_tokens: false }).ids;
    const actual: number[] = [];
    for (const part of splitter.split(text)) {
      if (typeof part === "number") {
        actual.push(part);
        continue;
      }
      const normalized = fast.normalize(part);
      for (const inner of normalizedSplitter.split(normalized)) {
        if (typeof inner === "number") actual.push(inner);
        else {
          const ids = fast.encodeNormalized(inner) ??
            hf.encode(inner, { add_special_tokens: false }).ids;
          for (const id of ids) actual.push(id);
        }
      }
    }
    if (actual.length !== expected.length || actual.some((id, i) => id !== expected[i])) {
      return text;
    }
  }
  return undefined;
}

/** Tokenization as the engines do it (compat.md §1): local, engine-backed, or none. */
export type {
  AsyncPromptTokenizer,
  ChatEncodeOptions,
  ChatMessage,
  EncodeOptions,
  PromptTokenizer,
} from "./types.ts";
export {
  ChatContentError,
  ChatTemplateError,
  TokenizeInputError,
  TokenizerLoadError,
  TokenizeUnavailableError,
  type TokenizeUnavailableReason,
} from "./errors.ts";
export { loadTokenizer, type LoadTokenizerOptions, resolveTokenizerDir } from "./load_tokenizer.ts";
export {
  createLocalTokenizer,
  LoadedTokenizer,
  type LocalTokenizerOptions,
  type TokenizerFiles,
  type TokenizerInfo,
  type TokenizerStats,
} from "./local_tokenizer.ts";
export {
  TokenSegmentCache,
  type TokenSegmentCacheOptions,
  type TokenSegmentCacheScope,
  type TokenSegmentCacheStats,
} from "./segment_cache.ts";
export type { ChatFlavor, ContentFormat } from "./chat_messages.ts";
export { LocalAsyncTokenizer } from "./local_async_tokenizer.ts";
export {
  EngineTokenizer,
  type EngineTokenizerOptions,
  type TokenizeEngine,
} from "./engine_tokenizer.ts";
export { NoneTokenizer } from "./none_tokenizer.ts";
export {
  type TokenizeFailureEvent,
  TokenizeFailureLog,
  type TokenizeFailureLogOptions,
} from "./failure_log.ts";
export { type TokenizeOutcome, tryTokenize } from "./try_tokenize.ts";

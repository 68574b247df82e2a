/**
 * Messages between the tokenizer worker pool (tokenizer_worker_pool.ts) and its workers
 * (tokenize_worker.ts). Token ids come back in a transferred Uint32Array: no copy on the way.
 */
import type { ChatEncodeOptions, ChatMessage, EncodeOptions } from "./types.ts";

/** What a worker loads once: the same arguments as `loadTokenizer`. */
export interface TokenizerSpec {
  dir: string;
  fastPath: boolean;
  cacheMaxTokens: number;
}

export type EncodeJob =
  | { kind: "text"; text: string; options?: EncodeOptions }
  | { kind: "chat"; messages: ChatMessage[]; options?: ChatEncodeOptions };

export type ToWorker =
  | { type: "load"; spec: TokenizerSpec }
  | { type: "encode"; id: number; job: EncodeJob };

/** `input`: the request's fault (a TokenizeInputError); `internal`: the tokenizer's. */
export interface WorkerFailure {
  kind: "input" | "internal";
  name: string;
  message: string;
}

export type FromWorker =
  | { type: "loaded" }
  | { type: "load_failed"; message: string }
  | { type: "encoded"; id: number; ids: Uint32Array }
  | { type: "failed"; id: number; failure: WorkerFailure };

/**
 * The request path's tokenizer when a worker pool is configured: long prompts go to the pool
 * (tokenizer_worker_pool.ts), short ones stay inline, where a round trip would cost more than the
 * work. "Long" counts every input a chat template renders (input_size.ts), so no input can hold
 * the main loop; when no worker can take a long prompt in time, it gets no tokens (dispatched by
 * load) rather than being tokenized inline. Same ids and failure handling as `LocalAsyncTokenizer`.
 */
import { TokenizeInputError } from "./errors.ts";
import { TokenizeFailureLog } from "./failure_log.ts";
import { chatInputSize } from "./input_size.ts";
import { LocalAsyncTokenizer } from "./local_async_tokenizer.ts";
import type { TokenizerWorkerPool } from "./tokenizer_worker_pool.ts";
import type {
  AsyncPromptTokenizer,
  ChatEncodeOptions,
  ChatMessage,
  EncodeOptions,
  PromptTokenizer,
} from "./types.ts";
import type { EncodeJob } from "./worker_protocol.ts";

/** Prompts up to this many characters (~500 tokens, well under a millisecond) are tokenized inline. */
export const INLINE_MAX_CHARS = 2_048;

export class PooledAsyncTokenizer implements AsyncPromptTokenizer {
  readonly mode = "local" as const;
  readonly failures: TokenizeFailureLog;
  readonly #pool: TokenizerWorkerPool;
  readonly #inline: LocalAsyncTokenizer;

  constructor(
    pool: TokenizerWorkerPool,
    tokenizer: PromptTokenizer,
    failures: TokenizeFailureLog = new TokenizeFailureLog(),
  ) {
    this.#pool = pool;
    this.failures = failures;
    this.#inline = new LocalAsyncTokenizer(tokenizer, failures);
  }

  get pool(): TokenizerWorkerPool {
    return this.#pool;
  }

  encode(text: string, options?: EncodeOptions): Promise<number[]> {
    if (text.length <= INLINE_MAX_CHARS) return this.#inline.encode(text, options);
    const job: EncodeJob = { kind: "text", text, options };
    return this.#run(job, affinityOf(text));
  }

  encodeChat(messages: ChatMessage[], options?: ChatEncodeOptions): Promise<number[]> {
    if (chatInputSize(messages, options, INLINE_MAX_CHARS) <= INLINE_MAX_CHARS) {
      return this.#inline.encodeChat(messages, options);
    }
    const job: EncodeJob = { kind: "chat", messages, options };
    return this.#run(job, conversationAffinity(messages));
  }

  #run(job: EncodeJob, affinity: number): Promise<number[]> {
    return this.#pool.encode(job, affinity).then(
      (ids) => {
        this.failures.recordSuccess();
        return ids;
      },
      (error) => {
        if (error instanceof TokenizeInputError) throw error;
        throw this.failures.unavailable(this.mode, job.kind, error);
      },
    );
  }
}

/** The conversation a chat belongs to: its opening messages, which every later turn repeats. */
function conversationAffinity(messages: ChatMessage[]): number {
  const opening = messages.slice(0, 2).map((m) =>
    typeof m.content === "string" ? m.content.slice(0, 256) : m.role
  );
  return affinityOf(opening.join("\u0000"));
}

/** FNV-1a over the first 256 characters: cheap, and stable for a conversation. */
function affinityOf(text: string): number {
  let hash = 0x811c9dc5;
  const end = Math.min(text.length, 256);
  for (let i = 0; i < end; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

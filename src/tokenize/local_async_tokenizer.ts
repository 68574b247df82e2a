/**
 * The request path's view of a local tokenizer: same ids, async signature, and failures turned
 * into `TokenizeUnavailableError` (load-only dispatch) unless the request itself is at fault.
 */
import { TokenizeInputError } from "./errors.ts";
import { TokenizeFailureLog } from "./failure_log.ts";
import type {
  AsyncPromptTokenizer,
  ChatEncodeOptions,
  ChatMessage,
  EncodeOptions,
  PromptTokenizer,
} from "./types.ts";

export class LocalAsyncTokenizer implements AsyncPromptTokenizer {
  readonly mode = "local" as const;
  readonly failures: TokenizeFailureLog;
  readonly #tokenizer: PromptTokenizer;

  constructor(tokenizer: PromptTokenizer, failures: TokenizeFailureLog = new TokenizeFailureLog()) {
    this.#tokenizer = tokenizer;
    this.failures = failures;
  }

  encode(text: string, options?: EncodeOptions): Promise<number[]> {
    return this.#run("text", () => this.#tokenizer.encode(text, options));
  }

  encodeChat(messages: ChatMessage[], options?: ChatEncodeOptions): Promise<number[]> {
    return this.#run("chat", () => this.#tokenizer.encodeChat(messages, options));
  }

  #run(kind: "text" | "chat", encode: () => number[]): Promise<number[]> {
    try {
      const ids = encode();
      this.failures.recordSuccess();
      return Promise.resolve(ids);
    } catch (error) {
      if (error instanceof TokenizeInputError) return Promise.reject(error);
      return Promise.reject(this.failures.unavailable(this.mode, kind, error));
    }
  }
}

/**
 * Mode `engine`: ask a backend instance to tokenize, so the ids are the engine's own.
 * - vLLM: `POST /tokenize` with `{model, prompt, add_special_tokens}` or
 *   `{model, messages, add_generation_prompt, tools, chat_template_kwargs}`.
 * - SGLang: `POST /v1/tokenize` with `{model, prompt, add_special_tokens}` or
 *   `{model, messages, tools, chat_template_kwargs}` (chat needs a recent SGLang).
 * Both answer `{"tokens": [...], "count": n, "max_model_len": m}`. Any failure (unreachable,
 * timeout, non-2xx, bad body) becomes `TokenizeUnavailableError("failed")`: load-only dispatch.
 */
import { TokenizeFailureLog } from "./failure_log.ts";
import type {
  AsyncPromptTokenizer,
  ChatEncodeOptions,
  ChatMessage,
  EncodeOptions,
} from "./types.ts";

export type TokenizeEngine = "vllm" | "sglang";

export interface EngineTokenizerOptions {
  engine: TokenizeEngine;
  /** The model name the engine serves (sent as `model`). */
  model: string;
  /** An instance's base URL, or a function choosing one per call (undefined: none available). */
  baseUrl: string | (() => string | undefined);
  /** Per-call deadline. */
  timeoutMs: number;
  fetch?: typeof fetch;
  /** Extra headers (e.g. `authorization` when SGLang runs with an API key). */
  headers?: Record<string, string>;
  failures?: TokenizeFailureLog;
}

const PATHS: Record<TokenizeEngine, string> = { vllm: "/tokenize", sglang: "/v1/tokenize" };

function isTokenList(value: unknown): value is number[] {
  return Array.isArray(value) && value.every((t) => Number.isInteger(t) && t >= 0);
}

export class EngineTokenizer implements AsyncPromptTokenizer {
  readonly mode = "engine" as const;
  readonly failures: TokenizeFailureLog;
  readonly #options: EngineTokenizerOptions;
  readonly #fetch: typeof fetch;

  constructor(options: EngineTokenizerOptions) {
    this.#options = options;
    this.#fetch = options.fetch ?? fetch;
    this.failures = options.failures ?? new TokenizeFailureLog({ label: options.model });
  }

  encode(text: string, options: EncodeOptions = {}): Promise<number[]> {
    return this.#call("text", {
      model: this.#options.model,
      prompt: text,
      add_special_tokens: options.addSpecialTokens ?? true,
    });
  }

  encodeChat(messages: ChatMessage[], options: ChatEncodeOptions = {}): Promise<number[]> {
    const body: Record<string, unknown> = { model: this.#options.model, messages };
    if (this.#options.engine === "vllm") {
      body.add_generation_prompt = options.addGenerationPrompt ?? true;
    }
    if (options.tools !== undefined) body.tools = options.tools;
    if (options.chatTemplateKwargs !== undefined) {
      body.chat_template_kwargs = options.chatTemplateKwargs;
    }
    return this.#call("chat", body);
  }

  async #call(kind: "text" | "chat", body: Record<string, unknown>): Promise<number[]> {
    try {
      const tokens = await this.#request(body);
      this.failures.recordSuccess();
      return tokens;
    } catch (error) {
      throw this.failures.unavailable(this.mode, kind, error);
    }
  }

  async #request(body: Record<string, unknown>): Promise<number[]> {
    const { baseUrl, engine, timeoutMs } = this.#options;
    const base = typeof baseUrl === "function" ? baseUrl() : baseUrl;
    if (!base) throw new Error(`no ${engine} instance is available to tokenize`);
    const url = base.replace(/\/+$/, "") + PATHS[engine];
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    try {
      let response: Response;
      try {
        response = await this.#fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", ...this.#options.headers },
          body: JSON.stringify(body),
          signal: controller.signal,
        });
      } catch (error) {
        if (controller.signal.aborted) {
          throw new Error(`POST ${url} timed out after ${timeoutMs} ms`);
        }
        throw new Error(`POST ${url} failed: ${(error as Error).message}`);
      }
      return await this.#tokensOf(url, response, controller);
    } finally {
      clearTimeout(timer);
    }
  }

  async #tokensOf(url: string, response: Response, controller: AbortController): Promise<number[]> {
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      if (controller.signal.aborted) {
        throw new Error(`POST ${url} timed out after ${this.#options.timeoutMs} ms`);
      }
      throw new Error(`POST ${url} failed while reading the answer: ${(error as Error).message}`);
    }
    if (!response.ok) {
      throw new Error(`POST ${url} answered ${response.status}: ${text.slice(0, 200)}`);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new Error(`POST ${url} answered invalid JSON: ${text.slice(0, 200)}`);
    }
    const tokens = (json as Record<string, unknown> | null)?.tokens;
    if (!isTokenList(tokens)) {
      throw new Error(`POST ${url} answered without a "tokens" list of ids`);
    }
    return tokens;
  }
}

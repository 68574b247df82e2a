/**
 * Errors of the tokenize layer. Two families matter to the router:
 * - `TokenizeInputError` (and subclasses): the request itself is bad; answer 400, as vLLM does.
 * - `TokenizeUnavailableError`: no tokens this time (mode `none`, engine down, internal failure);
 *   serve the request anyway with load-only dispatch.
 */

/** The tokenizer directory is incomplete or unreadable; raised at load, never per request. */
export class TokenizerLoadError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "TokenizerLoadError";
  }
}

/** A request the engine would reject too (maps to HTTP 400). */
export class TokenizeInputError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "TokenizeInputError";
  }
}

/** The chat template called `raise_exception(msg)` or failed to render this conversation. */
export class ChatTemplateError extends TokenizeInputError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ChatTemplateError";
  }
}

/** A message carries content this text-only tokenizer cannot render (images, audio...). */
export class ChatContentError extends TokenizeInputError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ChatContentError";
  }
}

/** Why a prompt has no tokens: `disabled` (mode none, text prompt) or `failed` (error, timeout). */
export type TokenizeUnavailableReason = "disabled" | "failed";

/** No tokens for this prompt: dispatch by load only. */
export class TokenizeUnavailableError extends Error {
  constructor(
    readonly reason: TokenizeUnavailableReason,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = "TokenizeUnavailableError";
  }
}

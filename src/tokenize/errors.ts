/**
 * Errors of the tokenize layer. Both leave a request without tokens (the router then dispatches
 * it by load and lets the engine answer); they differ in whose fault that is:
 * - `TokenizeInputError` (and subclasses): the request's (a template's `raise_exception`,
 *   non-text parts); not counted as a tokenizer failure.
 * - `TokenizeUnavailableError`: the tokenizer's (mode `none`, engine down, internal failure).
 */

/** The tokenizer directory is incomplete or unreadable; raised at load, never per request. */
export class TokenizerLoadError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "TokenizerLoadError";
  }
}

/** A request this tokenizer cannot render: the request's fault, not a tokenizer outage. */
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

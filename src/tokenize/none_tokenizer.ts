/**
 * Mode `none`: the router does not tokenize. Token-id prompts are used as they are (by the caller);
 * text and chat prompts have no tokens and are dispatched by load only.
 */
import { TokenizeUnavailableError } from "./errors.ts";
import type { AsyncPromptTokenizer } from "./types.ts";

export class NoneTokenizer implements AsyncPromptTokenizer {
  readonly mode = "none" as const;

  encode(): Promise<number[]> {
    return Promise.reject(
      new TokenizeUnavailableError(
        "disabled",
        "Tokenizer mode is none: text prompts are dispatched by load only",
      ),
    );
  }

  encodeChat(): Promise<number[]> {
    return Promise.reject(
      new TokenizeUnavailableError(
        "disabled",
        "Tokenizer mode is none: chat prompts are dispatched by load only",
      ),
    );
  }
}

/**
 * Tokens, or the reason there are none (then dispatch by load only). Input errors
 * (`TokenizeInputError`: bad template input, non-text parts) and anything unexpected are rethrown
 * for the caller to classify (`planDispatch` forwards both by load).
 */
import { TokenizeUnavailableError, type TokenizeUnavailableReason } from "./errors.ts";

export type TokenizeOutcome =
  | { ok: true; tokens: number[] }
  | { ok: false; reason: TokenizeUnavailableReason; error: TokenizeUnavailableError };

export async function tryTokenize(pending: Promise<number[]>): Promise<TokenizeOutcome> {
  try {
    return { ok: true, tokens: await pending };
  } catch (error) {
    if (error instanceof TokenizeUnavailableError) {
      return { ok: false, reason: error.reason, error };
    }
    throw error;
  }
}

import { anthropicErrorResponse } from "./anthropic_errors.ts";
import { type Endpoint, speaksAnthropic } from "./endpoints.ts";
import type { HttpError } from "./errors.ts";

/** How the router's own error reaches a client of one route: in the shape its SDK parses. */
export type ErrorAnswer = (error: HttpError, headers?: HeadersInit) => Response;

const OPENAI: ErrorAnswer = (error, headers) => error.toResponse(headers);

export function errorAnswerFor(endpoint: Endpoint): ErrorAnswer {
  return speaksAnthropic(endpoint) ? anthropicErrorResponse : OPENAI;
}

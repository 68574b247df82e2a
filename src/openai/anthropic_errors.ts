import type { HttpError } from "./errors.ts";

/**
 * Anthropic's error body, `{"type":"error","error":{"type","message"}}`, with the error type its
 * SDK maps the status to; vLLM's /v1/messages answers in this shape too.
 */
const TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  529: "overloaded_error",
};

export function anthropicErrorBody(status: number, message: string) {
  const type = TYPES[status] ?? (status >= 500 ? "api_error" : "invalid_request_error");
  return { type: "error", error: { type, message } };
}

/** The router's error on an Anthropic route: same status and headers, Anthropic's body. */
export function anthropicErrorResponse(error: HttpError, extraHeaders?: HeadersInit): Response {
  const headers = new Headers(error.options.headers);
  new Headers(extraHeaders).forEach((value, key) => headers.set(key, value));
  headers.set("content-type", "application/json");
  return new Response(JSON.stringify(anthropicErrorBody(error.status, error.message)), {
    status: error.status,
    headers,
  });
}

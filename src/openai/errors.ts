/** OpenAI's error body: `{"error":{"message","type","param","code"}}`, the only shape clients parse. */
export interface OpenAIErrorBody {
  /** `code` is a string in OpenAI's answers; vLLM's own errors put the status there. */
  error: { message: string; type: string; param: string | null; code: string | number | null };
}

export interface OpenAIErrorOptions {
  type?: string;
  param?: string | null;
  code?: string | number | null;
  headers?: HeadersInit;
}

const DEFAULT_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  404: "invalid_request_error",
  413: "invalid_request_error",
  429: "rate_limit_error",
  502: "server_error",
  503: "server_error",
  504: "server_error",
};

export function openAIErrorBody(
  status: number,
  message: string,
  options: OpenAIErrorOptions = {},
): OpenAIErrorBody {
  return {
    error: {
      message,
      type: options.type ?? DEFAULT_TYPES[status] ??
        (status >= 500 ? "server_error" : "invalid_request_error"),
      param: options.param ?? null,
      code: options.code ?? null,
    },
  };
}

export function openAIError(
  status: number,
  message: string,
  options: OpenAIErrorOptions = {},
): Response {
  const headers = new Headers(options.headers);
  headers.set("content-type", "application/json");
  return new Response(JSON.stringify(openAIErrorBody(status, message, options)), {
    status,
    headers,
  });
}

/** An error raised inside the request path that maps to one OpenAI-shaped HTTP answer. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly options: OpenAIErrorOptions = {},
  ) {
    super(message);
    this.name = "HttpError";
  }

  toResponse(extraHeaders?: HeadersInit): Response {
    const headers = new Headers(this.options.headers);
    new Headers(extraHeaders).forEach((value, key) => headers.set(key, value));
    return openAIError(this.status, this.message, { ...this.options, headers });
  }
}

/** A client's text quoted in an error message, cut to `max` characters (it may be megabytes). */
export function quoted(text: string, max = 200): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} characters)`;
}

/** A request body past `limits.maxBodyBytes` (413); the connection closes: the rest is not read. */
export function bodyTooLarge(maxBytes: number): HttpError {
  return new HttpError(413, `Request body is larger than the limit of ${maxBytes} bytes`, {
    code: "request_too_large",
    headers: { connection: "close" },
  });
}

/** A request body not in within `limits.clientBodyTimeoutMs` (408); the connection closes. */
export function bodyTimeout(timeoutMs: number): HttpError {
  return new HttpError(
    408,
    `The request body did not arrive within ${timeoutMs} ms (limits.clientBodyTimeoutMs).`,
    { code: "request_timeout", headers: { connection: "close" } },
  );
}

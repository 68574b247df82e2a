/**
 * The engine routes the router carries, by the name they are counted under (the `endpoint` of
 * metrics, logs and traces). Inference routes are read for their prompt and routed cache-aware;
 * the others (pooling and utilities) are routed by load to an instance of the model, their body
 * forwarded as received (docs/api.md).
 */
export const INFERENCE_PATHS = {
  completions: "/v1/completions",
  chat: "/v1/chat/completions",
  /** Anthropic's Messages API, as vLLM serves it (src/openai/anthropic_messages.ts). */
  messages: "/v1/messages",
  /** OpenAI's Responses API, as vLLM serves it (src/openai/responses_request.ts). */
  responses: "/v1/responses",
  /** SGLang's native API (src/openai/sglang_generate.ts). */
  generate: "/generate",
} as const;

export type InferenceEndpoint = keyof typeof INFERENCE_PATHS;

/** Load-routed routes: each path the engines (vLLM's OpenAI server) serve, by its name. */
export const LOAD_ROUTED_PATHS = {
  embeddings: ["/v1/embeddings"],
  pooling: ["/pooling"],
  classify: ["/classify"],
  score: ["/score", "/v1/score"],
  rerank: ["/rerank", "/v1/rerank", "/v2/rerank"],
  tokenize: ["/tokenize"],
  detokenize: ["/detokenize"],
  /** Anthropic's token count of a Messages body, as vLLM serves it. */
  count_tokens: ["/v1/messages/count_tokens"],
} as const;

export type LoadRoutedEndpoint = keyof typeof LOAD_ROUTED_PATHS;

/**
 * Uploads (multipart/form-data audio, as vLLM serves it for speech models): routed by load like
 * the routes above, their body streamed to the engine as it arrives (src/gateway/upload_body.ts).
 */
export const UPLOAD_PATHS = {
  transcriptions: "/v1/audio/transcriptions",
  translations: "/v1/audio/translations",
} as const;

export type UploadEndpoint = keyof typeof UPLOAD_PATHS;

export type Endpoint = InferenceEndpoint | LoadRoutedEndpoint | UploadEndpoint;

/** The routes whose body is JSON, read whole before it is routed. */
export type JsonEndpoint = InferenceEndpoint | LoadRoutedEndpoint;

export function isInferenceEndpoint(endpoint: Endpoint): endpoint is InferenceEndpoint {
  return endpoint in INFERENCE_PATHS;
}

/** Routes whose clients are Anthropic's: the router's own errors there take Anthropic's shape. */
export function speaksAnthropic(endpoint: Endpoint): boolean {
  return endpoint === "messages" || endpoint === "count_tokens";
}

/** The body field that carries a prompt's token ids on an inference route. */
export function tokenIdsField(endpoint: Endpoint): "prompt" | "input_ids" {
  return endpoint === "generate" ? "input_ids" : "prompt";
}

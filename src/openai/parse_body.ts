import { parseAnthropicMessages } from "./anthropic_messages.ts";
import { parseResponsesRequest } from "./responses_request.ts";
import { parseGenerateRequest } from "./sglang_generate.ts";
import { isInferenceEndpoint, type JsonEndpoint } from "./endpoints.ts";
import { parseLoadRoutedRequest } from "./load_routed_request.ts";
import { type ParsedRequest, parseOpenAIRequest } from "./request.ts";

/** A request body read as its endpoint is: inference for its prompt, the others for `model`. */
export function parseRequestBody(endpoint: JsonEndpoint, bytes: Uint8Array): ParsedRequest {
  if (endpoint === "messages") return parseAnthropicMessages(endpoint, bytes);
  if (endpoint === "responses") return parseResponsesRequest(endpoint, bytes);
  if (endpoint === "generate") return parseGenerateRequest(endpoint, bytes);
  return isInferenceEndpoint(endpoint)
    ? parseOpenAIRequest(endpoint, bytes)
    : parseLoadRoutedRequest(endpoint, bytes);
}

import type { HttpError } from "./errors.ts";
import type { LoadRoutedEndpoint } from "./endpoints.ts";
import { InvalidRequestError, type ParsedRequest, parseJsonObject } from "./request.ts";

/**
 * A pooling or utility request (src/openai/endpoints.ts): a JSON object whose `model`, when given,
 * is a string. Nothing else is read: the engine judges the rest, and the body is forwarded as
 * received. `model` is optional, as vLLM's own server takes it: empty here means "the router's
 * only model" (the gateway decides).
 */
export function parseLoadRoutedRequest(
  endpoint: LoadRoutedEndpoint,
  bytes: Uint8Array,
): ParsedRequest {
  const body = parseJsonObject(bytes);
  const model = body.model ?? "";
  if (typeof model !== "string") {
    throw new InvalidRequestError(
      "Invalid 'model': expected a string",
      "model",
      "invalid_value",
    );
  }
  return {
    endpoint,
    model,
    stream: body.stream === true,
    prompt: { kind: "opaque", chars: bytes.byteLength },
    user: typeof body.user === "string" ? body.user : undefined,
    body,
  };
}

/** A load-routed request without `model` while the router serves several: which one is unknown. */
export function modelNeeded(models: readonly string[]): HttpError {
  return new InvalidRequestError(
    `Missing required parameter: 'model' (this router serves ${models.join(", ")})`,
    "model",
    "missing_required_parameter",
  );
}

/**
 * An upload's request as the gateway reads it: its `model` field, found while the multipart body
 * streams in (src/openai/multipart_field.ts), and the parsed request routed by load.
 */
import type { UploadEndpoint } from "../openai/endpoints.ts";
import { bodyTooLarge, HttpError } from "../openai/errors.ts";
import { FormFieldScanner, multipartBoundary } from "../openai/multipart_field.ts";
import type { ParsedRequest } from "../openai/request.ts";
import type { UploadBody } from "./upload_body.ts";

/** Bytes of an upload kept for a retry once the first attempt is under way. */
export const UPLOAD_REPLAY_BYTES = 4 * 1024 * 1024;

/** The body's `model` field ("" when it has none: the gateway picks the only model). */
export async function uploadModel(
  request: Request,
  upload: UploadBody | undefined,
  maxBytes: number,
): Promise<string> {
  const boundary = multipartBoundary(request.headers.get("content-type"));
  if (!boundary || !upload) {
    throw new HttpError(400, "An audio request is a multipart/form-data body with a file", {
      code: "invalid_value",
    });
  }
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (declared > maxBytes) throw bodyTooLarge(maxBytes);
  const scanner = new FormFieldScanner(boundary, "model");
  while (scanner.result.kind === "more") {
    const chunk = await upload.read();
    if (!chunk) scanner.end();
    else scanner.push(chunk);
  }
  const result = scanner.result;
  return result.kind === "found" ? result.value.trim() : "";
}

export function uploadRequest(
  endpoint: UploadEndpoint,
  request: Request,
  model: string,
): ParsedRequest {
  const declared = Number(request.headers.get("content-length") ?? NaN);
  return {
    endpoint,
    model,
    stream: false,
    // Audio is not tokenized here: its load counts one token per 4 bytes, as other opaque bodies.
    prompt: { kind: "opaque", chars: Number.isFinite(declared) ? declared : 0 },
    body: {},
  };
}

/**
 * The fake engine's audio routes, as vLLM's OpenAI server serves them for a speech model
 * (vllm/entrypoints/openai/speech_to_text, vLLM 0.32): `POST /v1/audio/transcriptions` and
 * `/translations` take a multipart/form-data body with a `file` and a `model`, and answer
 * `{"text": ...}` (plain text with `response_format=text`). A body without its file gets a 400.
 * The made-up text names the file's size and SHA-256, so tests can see the bytes arrived whole.
 */
import { bytesToHex } from "../hashing/hex.ts";

export const AUDIO_PATHS = ["/v1/audio/transcriptions", "/v1/audio/translations"];

export interface AudioAnswer {
  status: number;
  contentType: string;
  body: string;
  /** What the engine received, for its records. */
  received: Record<string, unknown>;
}

export async function audioAnswer(request: Request, model: string): Promise<AudioAnswer> {
  let form: FormData;
  try {
    form = await request.formData();
  } catch (error) {
    return refused(`The request body is not a multipart form: ${(error as Error).message}`);
  }
  const file = form.get("file");
  const named = form.get("model");
  const received = { model: named, fileBytes: file instanceof File ? file.size : undefined };
  if (!(file instanceof File)) return { ...refused("file: Field required"), received };
  if (typeof named === "string" && named !== model) {
    const body = { error: { message: `The model \`${named}\` does not exist.`, code: 404 } };
    return { status: 404, contentType: "application/json", body: JSON.stringify(body), received };
  }
  const digest = bytesToHex(
    new Uint8Array(await crypto.subtle.digest("SHA-256", await file.arrayBuffer())),
  );
  const text = `${file.size} bytes, sha256 ${digest}`;
  return form.get("response_format") === "text"
    ? { status: 200, contentType: "text/plain; charset=utf-8", body: text, received }
    : { status: 200, contentType: "application/json", body: JSON.stringify({ text }), received };
}

function refused(message: string): AudioAnswer {
  const body = { error: { message, type: "BadRequestError", param: null, code: 400 } };
  return { status: 400, contentType: "application/json", body: JSON.stringify(body), received: {} };
}

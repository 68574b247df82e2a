/** One request of the hardening probe: what is sent, and which family of bad input it is. */
export interface ProbeInput {
  family: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Uint8Array<ArrayBuffer>;
}

export const MODEL = "probe-model";
export const COMPLETIONS = "/v1/completions";
export const CHAT = "/v1/chat/completions";

const encoder = new TextEncoder();

export function jsonInput(
  family: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): ProbeInput {
  return rawInput(family, path, JSON.stringify(body) ?? "undefined", headers);
}

export function rawInput(
  family: string,
  path: string,
  text: string | Uint8Array<ArrayBuffer>,
  headers: Record<string, string> = {},
): ProbeInput {
  return {
    family,
    method: "POST",
    path,
    headers: { "content-type": "application/json", ...headers },
    body: typeof text === "string" ? encoder.encode(text) : text,
  };
}

/** A valid completions body (token-id or text prompt), two tokens. */
export function validCompletion(): Record<string, unknown> {
  return { model: MODEL, prompt: "hello there", max_tokens: 2 };
}

/** A valid chat body, two tokens. */
export function validChat(): Record<string, unknown> {
  return { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 2 };
}

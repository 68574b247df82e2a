/**
 * The value a request is made sticky by, read from what is known before tokenization (the arm
 * picks the policy that planning uses, so it must come first). Pure.
 *
 * - `header:NAME`: the header's value (e.g. `x-session-id`).
 * - `user`: the OpenAI `user` field.
 * - `api_key`: the `Authorization: Bearer` token. It is only ever hashed (with the salt and an
 *   arm name) and never stored or logged.
 * - `prefix`: the prompt's opening, standing in for a conversation id. Not the literal first
 *   chunk: a shared system prompt makes that one key for everybody (every request of the Mooncake
 *   conversation trace has the same first block), which would put all traffic in one arm.
 *   Chat: every message up to and including the first user message (stays the same on each
 *   later turn of the conversation; differs between conversations sharing a system prompt).
 *   Text prompts: the first `4 × prefixTokens` characters; token-id prompts: the first
 *   `prefixTokens` ids. In the simulator: the trace's block id that ends the first
 *   `prefixTokens` tokens (hash ids are prefix-chained, so it names the whole opening).
 * - `random`: no key, a weighted random arm per request (not sticky: for load-only policies).
 *
 * Returns `null` for `random`, `undefined` when the request lacks the key (then the fallback
 * rule applies and the request is counted as unkeyed).
 */

export type ExperimentKey =
  | { kind: "header"; name: string }
  | { kind: "user" }
  | { kind: "api_key" }
  | { kind: "prefix" }
  | { kind: "random" };

/** Parses a validated `key` string (`header:x-session-id`, `user`, ...). */
export function parseExperimentKey(key: string): ExperimentKey {
  if (key.startsWith("header:")) return { kind: "header", name: key.slice(7).toLowerCase() };
  switch (key) {
    case "user":
    case "api_key":
    case "prefix":
    case "random":
      return { kind: key };
  }
  throw new Error(
    `Unknown experiment key "${key}": use header:NAME, user, api_key, prefix or random.`,
  );
}

/** Longest key value used (longer values are cut: they only feed a hash). */
const MAX_KEY_CHARS = 4096;

export function experimentKeyValue(
  key: ExperimentKey,
  request: { headers: Headers; body: Record<string, unknown> },
  prefixTokens: number,
): string | null | undefined {
  switch (key.kind) {
    case "random":
      return null;
    case "header":
      return nonEmpty(request.headers.get(key.name));
    case "user":
      return nonEmpty(request.body.user);
    case "api_key": {
      const match = /^Bearer\s+(.+)$/i.exec(request.headers.get("authorization") ?? "");
      return match ? nonEmpty(match[1]) : undefined;
    }
    case "prefix":
      return promptOpening(request.body, prefixTokens);
  }
}

/** The prompt's opening as a string (see the module comment), or undefined without a prompt. */
export function promptOpening(
  body: Record<string, unknown>,
  prefixTokens: number,
): string | undefined {
  if (Array.isArray(body.messages)) {
    const opening: unknown[] = [];
    for (const message of body.messages) {
      const m = message as Record<string, unknown> | null;
      opening.push([m?.role ?? null, m?.content ?? null, m?.name ?? null]);
      if (m?.role === "user") break;
    }
    return opening.length ? "chat:" + JSON.stringify(opening) : undefined;
  }
  let prompt = body.prompt;
  // A batch of prompts: its first one decides (the batch is one request, one arm).
  if (Array.isArray(prompt) && prompt.length > 0 && typeof prompt[0] !== "number") {
    prompt = prompt[0];
  }
  if (typeof prompt === "string") {
    return prompt.length ? "text:" + prompt.slice(0, 4 * prefixTokens) : undefined;
  }
  if (Array.isArray(prompt) && prompt.length > 0) {
    return "ids:" + prompt.slice(0, prefixTokens).join(",");
  }
  return undefined;
}

function nonEmpty(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  const trimmed = value.trim();
  return trimmed ? trimmed.slice(0, MAX_KEY_CHARS) : undefined;
}

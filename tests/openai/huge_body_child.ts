/**
 * Run by huge_body_test.ts in a child process with a small V8 heap: builds one huge request body,
 * parses it and prints the outcome as one JSON line. A parser that allocates per element dies of
 * heap exhaustion here instead of answering.
 *
 *   deno run --allow-read --v8-flags=--max-old-space-size=256 tests/openai/huge_body_child.ts \
 *     <case> [request-module-url]
 */
import type { HttpError } from "../../src/openai/errors.ts";

type Endpoint = "completions" | "chat";
type Parse = (endpoint: Endpoint, bytes: Uint8Array) => {
  prompt: { kind: string; tokens?: number[]; messages?: unknown[] };
};

/** `count` copies of `item` joined by commas, then `last`: a JSON array's inside. */
function repeated(item: string, count: number, last: string): string {
  return `${`${item},`.repeat(count)}${last}`;
}

const CASES: Record<string, () => [Endpoint, string]> = {
  // 4 M realistic ids (~28 MB, under the 32 MiB body limit).
  "token-ids":
    () => ["completions", `{"model":"m","prompt":[${repeated("151643", 4e6 - 1, "7")}]}`],
  // 1 M strings, then a number: fits no prompt form.
  "strings-then-number": () => [
    "completions",
    `{"model":"m","prompt":[${repeated('"a"', 1e6, "5")}]}`,
  ],
  // 4 M numbers where messages belong.
  "messages-of-numbers":
    () => ["chat", `{"model":"m","messages":[${repeated("1", 4e6 - 1, "1")}]}`],
  // 4 M numbers as stop sequences.
  "stop-of-numbers": () => [
    "completions",
    `{"model":"m","prompt":"x","stop":[${repeated("1", 4e6 - 1, "1")}]}`,
  ],
};

const [name, moduleUrl = new URL("../../src/openai/request.ts", import.meta.url).href] = Deno.args;
const build = CASES[name];
if (!build) throw new Error(`unknown case ${name}; one of ${Object.keys(CASES).join(", ")}`);
const { parseOpenAIRequest } = await import(moduleUrl) as { parseOpenAIRequest: Parse };
const [endpoint, text] = build();
const bytes = new TextEncoder().encode(text);
const started = performance.now();
let outcome: Record<string, unknown>;
try {
  const { prompt } = parseOpenAIRequest(endpoint, bytes);
  outcome = { ok: true, kind: prompt.kind, count: (prompt.tokens ?? prompt.messages)?.length };
} catch (error) {
  const { status, message, options } = error as HttpError;
  outcome = { ok: false, status, param: options?.param, message };
}
console.log(JSON.stringify({
  ...outcome,
  bodyBytes: bytes.length,
  parseMs: Math.round(performance.now() - started),
}));

/**
 * Bodies that are not the JSON they claim to be: truncations of valid bodies, broken syntax,
 * invalid UTF-8, a byte-order mark, deep nesting, JSON that is not an object, empty bodies.
 */
import {
  CHAT,
  COMPLETIONS,
  type ProbeInput,
  rawInput,
  validChat,
  validCompletion,
} from "./probe_input.ts";
import { nestedObjectText } from "./wrong_values.ts";

const BROKEN_TEXTS = [
  "",
  " ",
  "{",
  "}",
  "[",
  "{]",
  "null",
  "true",
  "0",
  '"a string"',
  "[]",
  "[{}]",
  "{,}",
  '{"model":}',
  '{"model" "x"}',
  "{'model': 'x'}",
  '{"model":"probe-model",}',
  '{"model":"probe-model" "prompt":"x"}',
  '{"model":NaN}',
  '{"max_tokens":Infinity}',
  '{"max_tokens":-Infinity}',
  '{"max_tokens":1e99999}',
  '{"max_tokens":0x10}',
  '{"max_tokens":01}',
  '{"prompt":"\\u12"}',
  '{"prompt":"\\x41"}',
  '{"prompt":"tab\there"}',
  '{"prompt":"line\nbreak"}',
  "undefined",
  "\ufeff{}",
  '{"a":1}garbage',
  '{"a":1}{"b":2}',
  "/* comment */ {}",
  '{"model":"probe-model","model":"other"}',
];

export function rawInputs(): ProbeInput[] {
  const inputs: ProbeInput[] = [];
  for (const path of [COMPLETIONS, CHAT]) {
    for (const text of BROKEN_TEXTS) inputs.push(rawInput("json.broken", path, text));
    const valid = JSON.stringify(path === CHAT ? validChat() : validCompletion());
    for (let cut = 1; cut < valid.length; cut++) {
      inputs.push(rawInput("json.truncated", path, valid.slice(0, cut)));
    }
    for (const bytes of INVALID_UTF8) {
      inputs.push(rawInput("utf8.invalid", path, withBytes(valid, bytes)));
    }
    for (const depth of [100, 1_000, 10_000, 100_000]) {
      inputs.push(rawInput("json.deep_object", path, nestedObjectText(depth)));
      inputs.push(rawInput("json.deep_array", path, "[".repeat(depth) + "]".repeat(depth)));
      inputs.push(
        rawInput(
          "json.deep_field",
          path,
          valid.replace(/}$/, `,"extra":${nestedObjectText(depth)}}`),
        ),
      );
    }
  }
  return inputs;
}

/** Invalid UTF-8: lone continuation, overlong encodings, surrogates, truncated sequences, 0xff. */
const INVALID_UTF8 = [[0x80], [0xc0, 0xaf], [0xe0, 0x80, 0xaf], [0xed, 0xa0, 0x80], [0xf0, 0x9f], [
  0xff,
], [0xfe, 0xff]];

/** `json` with `bytes` placed inside its first string value. */
function withBytes(json: string, bytes: number[]): Uint8Array<ArrayBuffer> {
  const encoded = new TextEncoder().encode(json);
  const at = json.indexOf('"', json.indexOf(":")) + 1;
  const out = new Uint8Array(encoded.length + bytes.length);
  out.set(encoded.subarray(0, at));
  out.set(bytes, at);
  out.set(encoded.subarray(at), at + bytes.length);
  return out;
}

/**
 * Large and deeply nested values for every field the router renders or tokenizes: message
 * contents and names, content parts, tools (names, descriptions, parameters), tool calls and
 * results, documents, chat-template kwargs, completion prompts (text, one "word", token ids and
 * batches). Sizes sit just under the default `maxPromptChars` (4M characters, 1M token ids), over
 * it (token ids up to the 32 MiB body limit), and nest 100,000 deep.
 */
import { CHAT, COMPLETIONS, jsonInput, MODEL, type ProbeInput, rawInput } from "./probe_input.ts";

/** Just under the default cap (4M characters, with room for the rest of the body). */
const UNDER_CAP = 3_500_000;
const OVER_CAP = 5_000_000;
const DEPTH = 100_000;

const words = (chars: number) =>
  "tidegate routes prompts ".repeat(Math.ceil(chars / 24)).slice(0, chars);
const oneWord = (chars: number) => "a".repeat(chars);
/** `[[[ … ]]]` nested `depth` deep, as JSON text (JSON.stringify of such a value would overflow). */
const deepArrayJson = (depth: number) => "[".repeat(depth) + "]".repeat(depth);
const deepObjectJson = (depth: number) => '{"a":'.repeat(depth) + "1" + "}".repeat(depth);

type Texts = Record<string, string>;

/** The texts every string field is tried with. */
function bigTexts(): Texts {
  return {
    words: words(UNDER_CAP),
    word: oneWord(UNDER_CAP),
    over: words(OVER_CAP),
  };
}

function chat(family: string, body: Record<string, unknown>): ProbeInput {
  return jsonInput(`chat.${family}`, CHAT, { model: MODEL, max_tokens: 2, ...body });
}

const user = (content: unknown) => ({ role: "user", content });

/** A chat body whose `field` is spliced in as raw JSON text (for nesting JSON.stringify refuses). */
function chatWithRaw(family: string, field: string, json: string): ProbeInput {
  const head = `{"model":"${MODEL}","max_tokens":2,"messages":[{"role":"user","content":"hi"}],`;
  return rawInput(`chat.${family}`, CHAT, `${head}"${field}":${json}}`);
}

function stringFieldInputs(size: string, text: string): ProbeInput[] {
  const fn = (fields: Record<string, unknown>) => ({
    type: "function",
    function: { name: "f", ...fields },
  });
  return [
    chat(`content.${size}`, { messages: [user(text)] }),
    chat(`content_part.${size}`, { messages: [user([{ type: "text", text }])] }),
    chat(`name.${size}`, { messages: [{ role: "user", content: "hi", name: text }] }),
    chat(`system.${size}`, { messages: [{ role: "system", content: text }, user("hi")] }),
    chat(`tool_name.${size}`, { messages: [user("hi")], tools: [fn({ name: text })] }),
    chat(`tool_description.${size}`, {
      messages: [user("hi")],
      tools: [fn({ description: text })],
    }),
    chat(`tool_result.${size}`, {
      messages: [user("hi"), { role: "tool", tool_call_id: "c1", content: text }],
    }),
    chat(`tool_call_arguments.${size}`, {
      messages: [user("hi"), {
        role: "assistant",
        tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: text } }],
      }],
    }),
    chat(`documents.${size}`, { messages: [user("hi")], documents: [{ title: "d", text }] }),
    chat(`kwargs.${size}`, { messages: [user("hi")], chat_template_kwargs: { note: text } }),
    jsonInput(`completions.prompt.${size}`, COMPLETIONS, {
      model: MODEL,
      max_tokens: 2,
      prompt: text,
    }),
    jsonInput(`completions.batch.${size}`, COMPLETIONS, {
      model: MODEL,
      max_tokens: 2,
      prompt: [text.slice(0, text.length >> 1), text.slice(0, text.length >> 1)],
    }),
  ];
}

function tokenIdInputs(): ProbeInput[] {
  const ids = (count: number) => Array.from({ length: count }, (_, i) => (i * 7919) % 150_000);
  const completion = (family: string, prompt: unknown) =>
    jsonInput(`completions.${family}`, COMPLETIONS, { model: MODEL, max_tokens: 2, prompt });
  return [
    // A token id counts as 4 characters: the default cap takes 1M of them.
    completion("token_ids.under", ids(UNDER_CAP / 4)),
    completion("token_ids.at_cap", ids(999_000)),
    completion("token_ids.over", ids(4_500_000)),
    completion("token_id_batch.under", [ids(400_000), ids(400_000)]),
  ];
}

function deepInputs(): ProbeInput[] {
  const array = deepArrayJson(DEPTH);
  const object = deepObjectJson(DEPTH);
  const head = `{"model":"${MODEL}","max_tokens":2,`;
  return [
    rawInput("chat.messages.deep", CHAT, `${head}"messages":${array}}`),
    rawInput("chat.content.deep", CHAT, `${head}"messages":[{"role":"user","content":${array}}]}`),
    chatWithRaw(
      "tools.deep",
      "tools",
      `[{"type":"function","function":{"name":"f","parameters":${object}}}]`,
    ),
    chatWithRaw("documents.deep", "documents", `[${object}]`),
    chatWithRaw("kwargs.deep", "chat_template_kwargs", `{"note":${object}}`),
    chat("tool_call_arguments.deep", {
      messages: [user("hi"), {
        role: "assistant",
        tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: array } }],
      }],
    }),
    rawInput("completions.prompt.deep", COMPLETIONS, `${head}"prompt":${array}}`),
  ];
}

/** Every large and deep input, in a fixed order. */
export function renderInputs(): ProbeInput[] {
  const inputs: ProbeInput[] = [];
  for (const [size, text] of Object.entries(bigTexts())) {
    inputs.push(...stringFieldInputs(size, text));
  }
  return [...inputs, ...tokenIdInputs(), ...deepInputs()];
}

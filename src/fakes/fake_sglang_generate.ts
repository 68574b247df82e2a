/**
 * The fake SGLang engine's native `/generate`, refused and answered as SGLang's HTTP server does
 * (sglang/srt/entrypoints/http_server.py `generate_request`, io_struct.py `GenerateReqInput`):
 * a body without exactly one of `text`, `input_ids`, `input_embeds` gets 400
 * `{"error": {"message": ...}}`; an answer is `{text, output_ids, meta_info}` (a list of them for
 * a batch); a stream sends such an object per token, with the text so far, an `index` per item of
 * a batch, and `data: [DONE]` last. `meta_info` carries the usage (`prompt_tokens`,
 * `completion_tokens`, `cached_tokens`). A batch's items share one generated text here; its
 * prompt and cached tokens are split evenly over the items.
 */
import type { OpenAiBody } from "./openai_body.ts";

/** SGLang's default `max_new_tokens` (sampling_params.py). */
const DEFAULT_MAX_NEW_TOKENS = 128;

/** The ValueError SGLang answers 400 with, or undefined when the body is one it serves. */
export function generateRefusal(body: OpenAiBody): string | undefined {
  const given = ["text", "input_ids", "input_embeds"].filter((f) =>
    body[f] !== undefined && body[f] !== null
  );
  if (given.length === 0 || given.length === 3) {
    return "Either text, input_ids or input_embeds should be provided.";
  }
  if (Array.isArray(body.input_ids) && body.input_ids.length === 0) {
    return "input_ids cannot be empty.";
  }
  const rid = body.rid;
  if (Array.isArray(rid) && new Set(rid).size !== rid.length) {
    return `Duplicate request IDs detected within the request: ${JSON.stringify(rid)}`;
  }
  return undefined;
}

/** The request seen as a completions body, for the fake's prompt counting and generation. */
export function generateView(body: OpenAiBody): OpenAiBody {
  const params = samplingParams(body);
  return {
    ...body,
    prompt: body.text ?? body.input_ids ?? "",
    max_tokens: params.max_new_tokens ?? DEFAULT_MAX_NEW_TOKENS,
  };
}

function samplingParams(body: OpenAiBody): Record<string, unknown> {
  const params = Array.isArray(body.sampling_params)
    ? body.sampling_params[0]
    : body.sampling_params;
  return params && typeof params === "object" ? params as Record<string, unknown> : {};
}

export interface GenerateUsage {
  promptTokens: number;
  outputTokens: number;
  cachedTokens: number;
  finishReason: "length" | "stop";
}

/** The request's ids: `rid` as given (one per item), else made up. */
export function generateRids(body: OpenAiBody, items: number | undefined): string[] {
  const rid = body.rid;
  if (items === undefined) {
    return [typeof rid === "string" ? rid : crypto.randomUUID().replaceAll("-", "")];
  }
  return Array.from(
    { length: items },
    (_, i) => Array.isArray(rid) && typeof rid[i] === "string" ? rid[i] : `${rid ?? "rid"}-${i}`,
  );
}

/** One item's output: text and ids so far, and its `meta_info` (finish_reason null until done). */
export function generateItem(
  rid: string,
  texts: readonly string[],
  usage: GenerateUsage,
  share: { index: number; of: number },
  done: boolean,
): Record<string, unknown> {
  const split = (total: number) =>
    Math.floor(total / share.of) + (share.index === 0 ? total % share.of : 0);
  return {
    text: texts.join(""),
    output_ids: texts.map((_, i) => 1000 + i),
    meta_info: {
      id: rid,
      finish_reason: done
        ? usage.finishReason === "length"
          ? { type: "length", length: texts.length }
          : { type: "stop", matched: null }
        : null,
      prompt_tokens: split(usage.promptTokens),
      completion_tokens: texts.length,
      cached_tokens: split(usage.cachedTokens),
    },
  };
}

/** The whole answer: one item, or a list for a batch. */
export function generateAnswer(
  rids: readonly string[],
  batch: boolean,
  texts: readonly string[],
  usage: GenerateUsage,
): unknown {
  const items = rids.map((rid, index) =>
    generateItem(rid, texts, usage, { index, of: rids.length }, true)
  );
  return batch ? items : items[0];
}

/** The stream events after one more token (`done`: the last), one per item. */
export function generateEvents(
  rids: readonly string[],
  batch: boolean,
  texts: readonly string[],
  usage: GenerateUsage,
  done: boolean,
): string {
  return rids.map((rid, index) => {
    const item = generateItem(rid, texts, usage, { index, of: rids.length }, done);
    return `data: ${JSON.stringify(batch ? { ...item, index } : item)}\n\n`;
  }).join("");
}

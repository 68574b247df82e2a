import { SseLines } from "./sse_lines.ts";

/** Token usage as engines report it (OpenAI's fields, or Anthropic's on /v1/messages). */
export interface ObservedUsage {
  promptTokens?: number;
  completionTokens?: number;
  /** `usage.prompt_tokens_details.cached_tokens`: what the engine actually reused. */
  cachedTokens?: number;
}

const MAX_JSON_BYTES = 4 * 1024 * 1024;

/**
 * Reads `usage` out of a response while it streams through, without holding the stream back:
 * SSE events are scanned line by line (only events mentioning "usage" are parsed); a JSON body
 * is kept up to 4 MiB and parsed at the end. Also counts SSE data events (≈ tokens).
 */
export class UsageSniffer {
  readonly #sse: boolean;
  readonly #decoder = new TextDecoder();
  /** Lines longer than MAX_SSE_LINE_CHARS are dropped. */
  readonly #lines = new SseLines((line, newlineAt) =>
    this.#completed += this.#readLine(line, newlineAt)
  );
  #completed = 0;
  /** The chunk's text being cut into lines, and where in it the next marker tail starts. */
  #text = "";
  #markerAt = -1;
  #json: Uint8Array[] = [];
  #jsonBytes = 0;
  usage: ObservedUsage = {};
  /** A Responses API answer's id (`resp_...`), from its body or its `response.created` event. */
  responseId?: string;
  /** SSE `data:` events other than `[DONE]`. */
  events = 0;
  /** SGLang /generate items' usage by their index in the batch. */
  readonly #generateItems = new Map<number, ObservedUsage>();

  constructor(contentType: string | null) {
    this.#sse = (contentType ?? "").includes("text/event-stream");
  }

  get isStream(): boolean {
    return this.#sse;
  }

  /** Feeds one chunk; returns how many SSE data events it completed. */
  push(chunk: Uint8Array): number {
    if (!this.#sse) {
      if (this.#jsonBytes + chunk.byteLength <= MAX_JSON_BYTES) this.#json.push(chunk);
      this.#jsonBytes += chunk.byteLength;
      return 0;
    }
    this.#completed = 0;
    this.#text = this.#decoder.decode(chunk, { stream: true });
    this.#markerAt = -1;
    this.#lines.push(this.#text);
    this.#text = "";
    this.events += this.#completed;
    return this.#completed;
  }

  /** Characters held for a line not yet ended (bounded by MAX_SSE_LINE_CHARS). */
  get bufferedChars(): number {
    return this.#lines.bufferedChars;
  }

  /** 1 when the line is a data event (other than `[DONE]`), reading its usage if it has one. */
  #readLine(line: string, newlineAt: number): number {
    if (!line.startsWith("data:")) return 0;
    const data = line.slice(5).trim();
    if (data === "[DONE]" || data === "") return 0;
    if (!this.#mayMention(newlineAt - line.length, newlineAt)) return 1;
    if (data.includes('"usage"') || data.includes('"response.created"')) this.#readUsage(data);
    // SGLang's /generate: each event repeats `meta_info`; the last of an item has its counts.
    else if (data.includes('"meta_info"') && !FINISH_PENDING.test(data)) this.#readUsage(data);
    return 1;
  }

  /**
   * Whether the chunk's text from `start` to `end` holds a marker's tail: one regular-expression
   * pass over the chunk instead of three substring searches per line (docs/benchmarks.md,
   * "Streamed answers, per chunk"). A line begun in an earlier chunk (`start` < 0) is always
   * searched.
   */
  #mayMention(start: number, end: number): boolean {
    if (start < 0) return true;
    if (this.#markerAt < start) {
      MARKER_TAIL.lastIndex = start;
      this.#markerAt = MARKER_TAIL.exec(this.#text)?.index ?? Infinity;
    }
    return this.#markerAt < end;
  }

  /** Call at the end of the body. */
  finish(): ObservedUsage {
    if (!this.#sse && this.#jsonBytes > 0 && this.#jsonBytes <= MAX_JSON_BYTES) {
      const body = new Uint8Array(this.#jsonBytes);
      let offset = 0;
      for (const part of this.#json) {
        body.set(part, offset);
        offset += part.byteLength;
      }
      this.#readUsage(this.#decoder.decode(body));
    }
    this.#json = [];
    return this.usage;
  }

  #readUsage(json: string): void {
    let value: unknown;
    try {
      value = JSON.parse(json);
    } catch {
      return;
    }
    this.responseId ??= responseIdOf(value);
    if (this.#readMetaInfo(value)) return;
    const usage = usageOf(value);
    if (!usage) return;
    const details = usage.prompt_tokens_details as Record<string, unknown> | null | undefined;
    const inputDetails = usage.input_tokens_details as Record<string, unknown> | null | undefined;
    this.usage = {
      promptTokens: number(usage.prompt_tokens) ?? anthropicInput(usage) ??
        this.usage.promptTokens,
      completionTokens: number(usage.completion_tokens) ?? number(usage.output_tokens) ??
        this.usage.completionTokens,
      cachedTokens: number(details?.cached_tokens) ?? number(inputDetails?.cached_tokens) ??
        number(usage.cache_read_input_tokens) ?? this.usage.cachedTokens,
    };
  }

  /** SGLang's usage: `meta_info` of each item, summed over a batch (a list, or indexed events). */
  #readMetaInfo(value: unknown): boolean {
    const items = Array.isArray(value) ? value : [value];
    let read = false;
    for (const [position, item] of items.entries()) {
      const meta = (item as { meta_info?: unknown } | null)?.meta_info as
        | Record<string, unknown>
        | undefined;
      if (!meta || typeof meta !== "object") continue;
      const index = number((item as { index?: unknown }).index) ?? position;
      this.#generateItems.set(index, {
        promptTokens: number(meta.prompt_tokens),
        completionTokens: number(meta.completion_tokens),
        cachedTokens: number(meta.cached_tokens),
      });
      read = true;
    }
    if (read) this.usage = summed([...this.#generateItems.values()]);
    return read;
  }
}

/** The end of each key `#readLine` looks for, without its opening quote (a cheaper pattern). */
const MARKER_TAIL = /(?:usage|response\.created|meta_info)"/g;

/** A /generate stream event whose item is not finished yet (its counts come later). */
const FINISH_PENDING = /"finish_reason":\s*null/;

function summed(items: ObservedUsage[]): ObservedUsage {
  const total = (pick: (u: ObservedUsage) => number | undefined) =>
    items.some((u) => pick(u) !== undefined)
      ? items.reduce((sum, u) => sum + (pick(u) ?? 0), 0)
      : undefined;
  return {
    promptTokens: total((u) => u.promptTokens),
    completionTokens: total((u) => u.completionTokens),
    cachedTokens: total((u) => u.cachedTokens),
  };
}

const number = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/** The id of a Responses object, at the top or in an event's `response`. */
function responseIdOf(value: unknown): string | undefined {
  const body = value as { object?: unknown; id?: unknown; response?: unknown } | null;
  const response = body?.object === "response" ? body : body?.response as typeof body;
  return response?.object === "response" && typeof response.id === "string"
    ? response.id
    : undefined;
}

/** OpenAI's `usage`, or an Anthropic message's (at the top, or in a stream's `message_start`). */
function usageOf(value: unknown): Record<string, unknown> | undefined {
  const body = value as
    | { usage?: unknown; message?: { usage?: unknown }; response?: { usage?: unknown } }
    | null;
  const usage = body?.usage ?? body?.message?.usage ?? body?.response?.usage;
  return usage && typeof usage === "object" ? usage as Record<string, unknown> : undefined;
}

/** Anthropic counts the prompt apart from what the cache read or wrote: the sum is the prompt. */
function anthropicInput(usage: Record<string, unknown>): number | undefined {
  const input = number(usage.input_tokens);
  if (input === undefined) return undefined;
  return input + (number(usage.cache_read_input_tokens) ?? 0) +
    (number(usage.cache_creation_input_tokens) ?? 0);
}

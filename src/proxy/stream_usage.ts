/**
 * Asking a streaming engine for its usage (`stream_options.include_usage`) on the client's behalf,
 * and keeping that usage from a client that did not ask for it: the router reads the engine's
 * reused tokens, the client sees exactly the stream it asked for.
 */

/** A streamed request's body, with usage asked for when the client did not. */
export interface StreamUsageRequest {
  /** The bytes to send (the client's own when nothing changed). */
  bytes: Uint8Array<ArrayBuffer>;
  /** The decoded body to build P/D legs from (with the same change). */
  body: Record<string, unknown>;
  /** The router added `include_usage`: the usage chunk must be stripped from the answer. */
  strip: boolean;
}

/** True when the client asked for the final usage chunk itself. */
function clientAskedUsage(body: Record<string, unknown>): boolean {
  const options = body.stream_options as { include_usage?: unknown } | null | undefined;
  return options?.include_usage === true;
}

/**
 * Adds `stream_options.include_usage: true` to a streamed request that lacks it. Without
 * `stream_options` the bytes are spliced (no re-serialization of a long prompt); with other
 * `stream_options` the body is serialized again.
 */
export function requestStreamUsage(
  bytes: Uint8Array<ArrayBuffer>,
  body: Record<string, unknown>,
): StreamUsageRequest {
  if (body.stream !== true || clientAskedUsage(body)) return { bytes, body, strip: false };
  const existing = body.stream_options;
  const streamOptions = existing && typeof existing === "object" && !Array.isArray(existing)
    ? { ...existing, include_usage: true }
    : { include_usage: true };
  const changed = { ...body, stream_options: streamOptions };
  const spliced = existing === undefined ? spliceUsageOption(bytes) : undefined;
  const out = spliced ?? new TextEncoder().encode(JSON.stringify(changed));
  return { bytes: out, body: changed, strip: true };
}

const USAGE_OPTION = new TextEncoder().encode(',"stream_options":{"include_usage":true}}');

/** The body with the option inserted before its closing brace; undefined if it has none. */
function spliceUsageOption(bytes: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> | undefined {
  let end = bytes.byteLength - 1;
  while (end >= 0 && isJsonSpace(bytes[end])) end--;
  if (end < 0 || bytes[end] !== 0x7d /* } */) return undefined;
  const out = new Uint8Array(end + USAGE_OPTION.byteLength);
  out.set(bytes.subarray(0, end), 0);
  out.set(USAGE_OPTION, end);
  return out;
}

function isJsonSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

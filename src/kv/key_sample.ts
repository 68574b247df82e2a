/**
 * A bounded sample of the Mooncake master's `GET /get_all_keys` (docs/compat.md §4: text, one
 * key per line): at most `maxBytes` of the body, within `timeoutMs` for headers and body alike.
 * Never throws; a master that is slow, down or too big yields what arrived in time.
 */
import { masterRouteUrl } from "./mooncake_request.ts";

export interface KeySampleOptions {
  fetch?: typeof fetch;
  /** Body bytes read at most (default 256 KiB); the rest is not downloaded. */
  maxBytes?: number;
  /** Whole read, headers and body (default 2 s). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface KeySample {
  keys: string[];
  /** The body went on past `maxBytes` or the timeout: `keys` is a prefix of the store's. */
  truncated: boolean;
  /** Why nothing (or only part) could be read. */
  error?: string;
}

export async function readKeySample(
  url: string,
  options: KeySampleOptions = {},
): Promise<KeySample> {
  const maxBytes = options.maxBytes ?? 256 * 1024;
  const controller = new AbortController();
  const onAbort = () => controller.abort();
  options.signal?.addEventListener("abort", onAbort, { once: true });
  const timer = setTimeout(() => controller.abort(), options.timeoutMs ?? 2_000);
  const text = { value: "", truncated: false };
  try {
    const response = await (options.fetch ?? fetch)(masterRouteUrl(url, "/get_all_keys"), {
      signal: controller.signal,
    });
    if (!response.ok) {
      await response.body?.cancel();
      return { keys: [], truncated: false, error: `GET /get_all_keys: HTTP ${response.status}` };
    }
    await readBounded(response, maxBytes, text);
    return { keys: completeLines(text.value, text.truncated), truncated: text.truncated };
  } catch (error) {
    const reason = controller.signal.aborted ? "timed out" : (error as Error)?.message;
    return { keys: completeLines(text.value, true), truncated: true, error: reason };
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * The sample from the first of several masters (an HA group) that answers: a standby's 503 or a
 * refused connection passes to the next one. The last failure's sample when none answers.
 */
export async function readKeySampleFromMasters(
  urls: readonly string[],
  options: KeySampleOptions = {},
): Promise<KeySample> {
  let sample: KeySample = { keys: [], truncated: false, error: "no master URL configured" };
  for (const url of urls) {
    sample = await readKeySample(url, options);
    if (sample.error === undefined || sample.keys.length > 0) return sample;
    if (options.signal?.aborted) break;
  }
  return sample;
}

/** Appends the body's text up to `maxBytes`, then cancels the rest. */
async function readBounded(
  response: Response,
  maxBytes: number,
  into: { value: string; truncated: boolean },
): Promise<void> {
  const reader = response.body?.getReader();
  if (!reader) return;
  const decoder = new TextDecoder();
  let bytes = 0;
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      const room = maxBytes - bytes;
      into.value += decoder.decode(value.subarray(0, room), { stream: true });
      bytes += Math.min(room, value.length);
      if (value.length > room || bytes >= maxBytes) {
        into.truncated = true;
        break;
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** The keys of whole lines (a cut last line is dropped); empty lines are skipped. */
function completeLines(text: string, truncated: boolean): string[] {
  const lines = text.split("\n");
  if (truncated) lines.pop();
  return lines.filter((line) => line.length > 0);
}

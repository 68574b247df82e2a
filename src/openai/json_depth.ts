/**
 * How deep a JSON text nests, read from its bytes before parsing: a body nested 100,000 levels
 * takes JSON.parse tens of milliseconds (and overflows the stack of every later copy), while no
 * OpenAI request nests more than a few dozen levels, and Python's json module, which the engines
 * parse with, gives up near 1,000.
 */
export const MAX_JSON_DEPTH = 512;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/** True when brackets outside strings nest deeper than `limit` (the text may still be invalid). */
export function nestsDeeperThan(bytes: Uint8Array, limit = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) inString = true;
    else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
      if (++depth > limit) return true;
    } else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) depth--;
  }
  return false;
}

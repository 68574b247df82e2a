/**
 * A completions batch (`prompt` as a list) is routed as one request by what its prompts share:
 * the engine runs each prompt with its own prefix cache, so the part every prompt begins with is
 * the part an instance's cache serves every time. Pure functions on the parsed body.
 */

/** The longest list of token ids every list begins with. */
export function sharedTokenPrefix(lists: readonly (readonly number[])[]): number[] {
  const first = lists[0] ?? [];
  let length = first.length;
  for (let i = 1; i < lists.length && length > 0; i++) {
    const list = lists[i];
    length = Math.min(length, list.length);
    for (let t = 0; t < length; t++) {
      if (list[t] !== first[t]) {
        length = t;
        break;
      }
    }
  }
  return first.slice(0, length);
}

/** The longest text every text begins with. */
export function sharedTextPrefix(texts: readonly string[]): string {
  let prefix = texts[0] ?? "";
  for (let i = 1; i < texts.length && prefix.length > 0; i++) {
    const text = texts[i];
    let length = Math.min(prefix.length, text.length);
    for (let c = 0; c < length; c++) {
      if (text.charCodeAt(c) !== prefix.charCodeAt(c)) {
        length = c;
        break;
      }
    }
    prefix = prefix.slice(0, length);
  }
  return prefix;
}

/**
 * Building `GET /batch_query_keys?keys=k1,k2,...` URLs (docs/compat.md §4). Pure.
 *
 * v0.3.12+ percent-decodes the `keys` value once; v0.3.9-0.3.11 take it raw (and so do some later
 * builds whose handler still writes JSON by hand with `get_query_value`). Keys made only of
 * `[A-Za-z0-9_.~@/:-]` (every key preset of docs/compat.md §3 with ordinary model names) mean the same
 * to both, so they go out unescaped. Any other key is percent-encoded, which only v0.3.12+ reads
 * back correctly: an older master looks the escaped text up and answers OBJECT_NOT_FOUND.
 * A key cannot contain a comma (the master splits on it) and cannot be empty.
 */

const UNESCAPED_KEY = /^[A-Za-z0-9_.~@/:-]+$/;

/** Why a key cannot be queried, or undefined when it can. Call it at start-up on sample keys. */
export function storeKeyProblem(key: string): string | undefined {
  if (key.length === 0) return "a store key is empty: check the key preset's template";
  if (key.includes(",")) {
    return `store key ${JSON.stringify(key)} contains a comma, which /batch_query_keys cannot ` +
      "carry (the master splits keys on commas): change the key preset or the model name";
  }
  return undefined;
}

/** True when the key goes out as is and therefore works on v0.3.9-0.3.11 masters too. */
export function isPlainStoreKey(key: string): boolean {
  return UNESCAPED_KEY.test(key);
}

/** The text of one key inside the `keys=` value. */
export function encodeStoreKey(key: string): string {
  return isPlainStoreKey(key) ? key : encodeURIComponent(key);
}

/** `{base}/batch_query_keys?keys=...` for keys already checked with `storeKeyProblem`. */
export function batchQueryUrl(baseUrl: string, keys: readonly string[]): string {
  return `${trimBase(baseUrl)}/batch_query_keys?keys=${keys.map(encodeStoreKey).join(",")}`;
}

/** Consecutive slices of at most `size` keys. */
export function splitIntoBatches<T>(items: readonly T[], size: number): T[][] {
  const step = Math.max(1, Math.floor(size));
  const batches: T[][] = [];
  for (let i = 0; i < items.length; i += step) batches.push(items.slice(i, i + step));
  return batches;
}

/** A master route's URL (`/health`, `/get_all_keys`) under a base that may end in slashes. */
export function masterRouteUrl(baseUrl: string, route: string): string {
  return `${trimBase(baseUrl)}${route}`;
}

function trimBase(baseUrl: string): string {
  let end = baseUrl.length;
  while (end > 0 && baseUrl[end - 1] === "/") end--;
  return baseUrl.slice(0, end);
}

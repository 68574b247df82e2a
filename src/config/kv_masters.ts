/**
 * The Mooncake masters a model's `kv.url` names, in configured order: one URL, or every master
 * of an HA group. Empty when the model has no store.
 */
export function masterUrls(kv: { store?: string; url?: string | readonly string[] }): string[] {
  if (kv.store === "none" || kv.url === undefined) return [];
  return typeof kv.url === "string" ? [kv.url] : [...kv.url];
}

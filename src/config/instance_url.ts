/** Instance and store base URLs: what the router checks on one before it uses it, and its routes. */
import { normalizeHost } from "./host_allow_list.ts";

/** `http://user:pass@host`: credentials that would be logged and sent as `Authorization`. */
export function hasUserinfo(url: string): boolean {
  const parsed = URL.parse(url);
  return parsed !== null && (parsed.username !== "" || parsed.password !== "");
}

/** The URL's host, lower case, without brackets or a trailing dot; undefined if not a URL. */
export function urlHost(url: string): string | undefined {
  const parsed = URL.parse(url);
  return parsed ? normalizeHost(parsed.hostname) : undefined;
}

/** `path` under `base`, which may end in slashes (`http://e:8000/` + `/health`). */
export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, "") + (path.startsWith("/") ? path : `/${path}`);
}

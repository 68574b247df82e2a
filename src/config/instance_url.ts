/** What the router checks on an instance URL before it uses it. */
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

/**
 * The headers that tell an engine who the client is, set by the X-Forwarded-For rule
 * (forwarded_for.ts): a trusted proxy's claims are kept and the peer added to them; anyone else's
 * claims are replaced by what the router saw. `X-Forwarded-For`, RFC 7239's `Forwarded`,
 * `X-Real-IP`, and `Via` (RFC 9110 §7.6.3: each proxy appends itself).
 */
import { forwardedFor } from "./forwarded_for.ts";

/** How the router names itself in `Via`. */
const VIA_NAME = "1.1 tidegate";

/** Rewrites `headers` (the engine's copy) for a request from `peer`; in-process: untouched. */
export function setForwardingHeaders(
  headers: Headers,
  peer: string | undefined,
  isTrustedProxy: (peer: string) => boolean,
): void {
  if (!peer) return;
  const trusted = isTrustedProxy(peer);
  headers.set(
    "x-forwarded-for",
    forwardedFor(headers.get("x-forwarded-for"), peer, () => trusted)!,
  );
  headers.set(
    "forwarded",
    appended(headers.get("forwarded"), `for=${forwardedNode(peer)}`, trusted),
  );
  headers.set("via", appended(headers.get("via"), VIA_NAME, trusted));
  if (!trusted || !headers.get("x-real-ip")?.trim()) headers.set("x-real-ip", peer);
}

/** A trusted proxy's list with `entry` appended; anyone else's replaced by `entry` alone. */
function appended(received: string | null, entry: string, trusted: boolean): string {
  return trusted && received?.trim() ? `${received}, ${entry}` : entry;
}

/** RFC 7239 §6: an IPv6 address is bracketed and quoted. */
function forwardedNode(address: string): string {
  return address.includes(":") ? `"[${address}]"` : address;
}

/**
 * The `X-Forwarded-For` an engine gets: a trusted proxy's list with the proxy's own address
 * appended; from anyone else only their address (a client's own claim is never passed on).
 * Without a peer address (an in-process request) the header is left as it came.
 */
export function forwardedFor(
  received: string | null,
  peer: string | undefined,
  isTrustedProxy: (peer: string) => boolean,
): string | null {
  if (!peer) return received;
  if (received?.trim() && isTrustedProxy(peer)) return `${received}, ${peer}`;
  return peer;
}

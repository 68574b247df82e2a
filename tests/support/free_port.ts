/** Ports for the processes a test or benchmark starts (not a test file). */

/** Every port `freePort` returned in this process. */
const handedOut = new Set<number>();

/**
 * A port free right now on 127.0.0.1 (bound, read, released), and not one this process handed out
 * before: the kernel may give a just-closed port again, and two servers would then fail on one.
 */
export function freePort(): number {
  for (;;) {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (listener.addr as Deno.NetAddr).port;
    listener.close();
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    return port;
  }
}

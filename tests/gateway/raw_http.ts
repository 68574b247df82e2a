/** Raw TCP clients for the listener's connection-level tests: what no HTTP client lets a test do. */

/** A plain TCP connection to the router at `url`. */
export function connect(url: string): Promise<Deno.TcpConn> {
  return Deno.connect({ hostname: "127.0.0.1", port: Number(new URL(url).port) });
}

/**
 * What the router sends until `done` holds for it or the router closes the connection; the
 * connection is closed here after. Throws past `withinMs`.
 */
export async function readUntil(
  conn: Deno.TcpConn,
  withinMs: number,
  done: (text: string) => boolean = () => false,
): Promise<string> {
  let late = false;
  const timer = setTimeout(() => {
    late = true;
    conn.close();
  }, withinMs);
  const buffer = new Uint8Array(4096);
  const decoder = new TextDecoder();
  let text = "";
  try {
    while (!done(text)) {
      const read = await conn.read(buffer).catch(() => null);
      if (read === null) break;
      text += decoder.decode(buffer.subarray(0, read), { stream: true });
    }
  } finally {
    clearTimeout(timer);
  }
  if (late) throw new Error(`the connection was still open after ${withinMs} ms`);
  conn.close();
  return text;
}

/** Everything the router sends until it closes the connection; throws past `withinMs`. */
export function readUntilClosed(conn: Deno.TcpConn, withinMs: number): Promise<string> {
  return readUntil(conn, withinMs);
}

/**
 * A TCP proxy on 127.0.0.1 in front of a fake engine that closes the connection, without an
 * answer, on every request whose bytes hold `marker`: an engine process that chokes on a body.
 * Other requests pass through, one per connection (it asks the engine to close after each, so no
 * later request slips through a reused connection unread).
 */
export interface ChokingProxy {
  readonly url: string;
  /** Requests it dropped. */
  readonly dropped: number;
  close(): Promise<void>;
}

const HEADER_END = "\r\n\r\n";

export function startChokingProxy(targetPort: number, marker: string): ChokingProxy {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  let dropped = 0;
  const handle = async (client: Deno.Conn) => {
    open.add(client);
    try {
      const request = await readRequest(client);
      if (request === undefined || request.includes(marker)) {
        if (request !== undefined) dropped++;
        return;
      }
      const upstream = await Deno.connect({ hostname: "127.0.0.1", port: targetPort });
      open.add(upstream);
      const headEnd = request.indexOf(HEADER_END);
      const closing = request.slice(0, headEnd) + "\r\nconnection: close" + request.slice(headEnd);
      await upstream.write(new TextEncoder().encode(closing));
      await upstream.readable.pipeTo(client.writable).catch(() => {});
      open.delete(upstream);
    } catch {
      // either side went away
    } finally {
      open.delete(client);
      try {
        client.close();
      } catch {
        // closed by pipeTo
      }
    }
  };
  const serving = (async () => {
    for await (const client of listener) handle(client);
  })().catch(() => {});
  return {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    get dropped() {
      return dropped;
    },
    async close() {
      listener.close();
      for (const conn of open) {
        try {
          conn.close();
        } catch {
          // already closed
        }
      }
      await serving;
    },
  };
}

/** One request's head and Content-Length body as text (the router sends no chunked bodies). */
async function readRequest(conn: Deno.Conn): Promise<string | undefined> {
  const buffer = new Uint8Array(64 * 1024);
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const read = await conn.read(buffer);
    if (read === null) return undefined;
    text += decoder.decode(buffer.subarray(0, read), { stream: true });
    const headEnd = text.indexOf(HEADER_END);
    if (headEnd < 0) continue;
    const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(text.slice(0, headEnd))?.[1] ?? 0);
    if (new TextEncoder().encode(text.slice(headEnd + 4)).length >= length) return text;
  }
}

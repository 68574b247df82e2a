/**
 * The master's KV event socket for a pool that stays empty: a ZMTP 3.0 PUB endpoint on loopback
 * that greets each subscriber and publishes nothing, as the stub master's answers (every key
 * absent, no keys in `/get_all_keys`) say. With it the router's mirror of the pool is exact and
 * requests skip the lookup round trip.
 */
import { greeting, readyCommand } from "../../../src/kv/events/zmtp_codec.ts";

export interface SilentPublisher {
  endpoint: string;
  stop(): Promise<void>;
}

export function startSilentPublisher(): SilentPublisher {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const connections = new Set<Deno.Conn>();
  const accepting = (async () => {
    for await (const connection of listener) {
      connections.add(connection);
      void serve(connection).finally(() => connections.delete(connection));
    }
  })().catch(() => {}); // the listener was closed
  return {
    endpoint: `tcp://127.0.0.1:${listener.addr.port}`,
    async stop() {
      listener.close();
      for (const connection of connections) closeQuietly(connection);
      await accepting;
    },
  };
}

/** Greets, then reads and drops what the subscriber sends (its greeting and subscription). */
async function serve(connection: Deno.Conn): Promise<void> {
  try {
    for (const bytes of [greeting(), readyCommand("PUB")]) {
      let written = 0;
      while (written < bytes.length) written += await connection.write(bytes.subarray(written));
    }
    const buffer = new Uint8Array(4096);
    while (await connection.read(buffer) !== null) { /* the subscriber's bytes are not needed */ }
  } catch {
    // the subscriber left or the publisher stopped
  } finally {
    closeQuietly(connection);
  }
}

function closeQuietly(connection: Deno.Conn): void {
  try {
    connection.close();
  } catch {
    // already closed
  }
}

/**
 * A TCP proxy on 127.0.0.1 in front of a fake engine that can be "killed" like a crashed
 * process: the listener closes and every open connection is cut, so requests in flight fail
 * without an answer and new ones are refused. `revive()` listens again on the same port, as a
 * restarted engine would.
 */
export interface KillableProxy {
  readonly url: string;
  readonly port: number;
  readonly alive: boolean;
  kill(): void;
  revive(): void;
  close(): Promise<void>;
}

export function startKillableProxy(targetPort: number): KillableProxy {
  const connections = new Set<Deno.Conn>();
  const pumps = new Set<Promise<void>>();
  let listener: Deno.Listener | undefined;
  let port = 0;

  const pipe = async (from: Deno.Conn, to: Deno.Conn) => {
    try {
      await from.readable.pipeTo(to.writable);
    } catch {
      // cut by kill() or by the other side
    }
  };

  const serve = async (server: Deno.Listener) => {
    try {
      for await (const client of server) {
        connections.add(client);
        let upstream: Deno.Conn;
        try {
          upstream = await Deno.connect({ hostname: "127.0.0.1", port: targetPort });
        } catch {
          connections.delete(client);
          client.close();
          continue;
        }
        connections.add(upstream);
        const pump = Promise.all([pipe(client, upstream), pipe(upstream, client)]).then(() => {
          for (const conn of [client, upstream]) {
            connections.delete(conn);
            try {
              conn.close();
            } catch {
              // already closed
            }
          }
        });
        pumps.add(pump);
        pump.finally(() => pumps.delete(pump));
      }
    } catch {
      // listener closed
    }
  };

  const listen = () => {
    listener = Deno.listen({ hostname: "127.0.0.1", port });
    port = (listener.addr as Deno.NetAddr).port;
    serve(listener);
  };
  listen();

  const kill = () => {
    listener?.close();
    listener = undefined;
    for (const conn of connections) {
      try {
        conn.close();
      } catch {
        // already closed
      }
    }
    connections.clear();
  };

  return {
    get url() {
      return `http://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    get alive() {
      return listener !== undefined;
    },
    kill,
    revive() {
      if (!listener) listen();
    },
    async close() {
      kill();
      await Promise.all([...pumps]);
    },
  };
}

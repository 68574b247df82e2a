/**
 * Where the router listens: `node` (routes/node_listener.ts, the default, with connection-level
 * deadlines and caps) or `deno` (`Deno.serve`, without them; see docs/reliability.md, "The listener",
 * and, for what each costs, docs/benchmarks.md).
 */
import type { Config } from "../src/config/schema.ts";
import type { Listening, ListenOptions } from "./listening.ts";
import { listenNode } from "./node_listener.ts";

export type { Listening, ListenOptions } from "./listening.ts";

export function listen(
  server: Config["listen"]["server"],
  options: ListenOptions,
): Promise<Listening> {
  return server === "deno" ? listenDeno(options) : listenNode(options);
}

/** Deno.serve binds synchronously (throwing AddrInUse at once). */
function listenDeno(options: ListenOptions): Promise<Listening> {
  const server = Deno.serve({
    hostname: options.hostname,
    port: options.port,
    signal: options.signal,
    onListen: () => {},
    onError: options.onError,
  }, (request, info) => options.handler(request, info.remoteAddr));
  const { hostname, port } = server.addr;
  let stopped: Promise<void> | undefined;
  return Promise.resolve({
    hostname,
    port,
    finished: server.finished,
    shutdown: () => stopped ??= server.shutdown(),
  });
}

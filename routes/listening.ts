/** What a listener (routes/listener.ts picks one) is given, and what it gives back. */
import type { Config } from "../src/config/schema.ts";

export interface Listening {
  hostname: string;
  port: number;
  /** Resolves once the listener has closed. */
  finished: Promise<void>;
  /** Stops accepting; resolves when the requests in flight have been answered. Idempotent. */
  shutdown(): Promise<void>;
  /** Open client connections (the node listener counts them; Deno.serve does not say). */
  openConnections?: () => number;
}

export interface ListenOptions {
  hostname: string;
  port: number;
  handler: (request: Request, remoteAddr: Deno.NetAddr) => Response | Promise<Response>;
  limits: Config["limits"];
  /** Aborting it shuts the listener down. */
  signal?: AbortSignal;
  /** The answer when the handler throws. */
  onError: (error: unknown) => Response;
}

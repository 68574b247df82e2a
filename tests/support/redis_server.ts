/**
 * A throwaway `redis-server` on 127.0.0.1 for the shared-state tests: no persistence, killed by
 * `stop()`, and started again on the same port by `restart()` (an outage and its end).
 */
import { ensureDebianCommands } from "./debian_packages.ts";

export interface RedisServer {
  url: string;
  port: number;
  /** Kills the server at once (SIGKILL), as a crash would. Idempotent. */
  stop(): Promise<void>;
  /** Starts it again on the same port and waits until it accepts connections. */
  restart(): Promise<void>;
}

/**
 * A redis-server for a test, installing the Debian package when it can; `undefined` (with a
 * message saying how to install it) when the test has to skip.
 */
export async function redisServerOrSkip(): Promise<RedisServer | undefined> {
  const missing = await ensureDebianCommands([
    { command: "redis-server", versionArgs: ["--version"], pkg: "redis-server" },
  ]);
  if (missing.length > 0) {
    console.warn("skipped: redis-server is not installed (apt-get install -y redis-server)");
    return undefined;
  }
  return await startRedisServer();
}

export async function startRedisServer(): Promise<RedisServer> {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  let child: Deno.ChildProcess | undefined = await spawnRedis(port);
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      const running = child;
      child = undefined;
      if (!running) return;
      running.kill("SIGKILL");
      await running.status;
    },
    async restart() {
      if (child) return;
      child = await spawnRedis(port);
    },
  };
}

async function spawnRedis(port: number): Promise<Deno.ChildProcess> {
  const child = new Deno.Command("redis-server", {
    args: ["--port", `${port}`, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    stdout: "null",
    stderr: "null",
  }).spawn();
  const deadline = performance.now() + 10_000;
  for (;;) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return child;
    } catch {
      if (performance.now() > deadline) {
        child.kill("SIGKILL");
        await child.status;
        throw new Error(`redis-server did not start on port ${port} in 10 s`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

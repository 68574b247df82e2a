/**
 * A throwaway `redis-server` on 127.0.0.1 for the shared-state tests: no persistence, killed by
 * `stop()`, and started again on the same port by `restart()` (an outage and its end).
 */
import { eventually } from "./eventually.ts";
import { commandMissing } from "./needs_tool.ts";

export interface RedisServer {
  url: string;
  port: number;
  /** Kills the server at once (SIGKILL), as a crash would. Idempotent. */
  stop(): Promise<void>;
  /** Starts it again on the same port and waits until it accepts connections. */
  restart(): Promise<void>;
}

/** Why redis-server cannot run here, or undefined when it can (for `testNeeding`). */
export function redisServerMissing(): Promise<string | undefined> {
  return commandMissing("redis-server", ["--version"], "apt-get install -y redis-server");
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
  try {
    await eventually(
      async () => {
        try {
          (await Deno.connect({ hostname: "127.0.0.1", port })).close();
          return true;
        } catch {
          return false;
        }
      },
      10_000,
      `redis-server accepting connections on port ${port}`,
    );
  } catch (error) {
    child.kill("SIGKILL");
    await child.status;
    throw error;
  }
  return child;
}

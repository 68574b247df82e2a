import { parseArgs } from "node:util";
import { ConfigError, loadConfigFile } from "../config/load.ts";
import { createRouter, jsonLog } from "../gateway/router.ts";

const USAGE = `Usage: deno task start --config FILE [--host HOST] [--port PORT]

Runs the router from a JSON or YAML config file (see deploy/examples/).`;

/** `start`: serve from a config file until SIGINT/SIGTERM. Returns the exit code. */
export async function runStart(args: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        config: { type: "string", short: "c" },
        host: { type: "string" },
        port: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (!values.config) {
    console.error(`--config is required.\n\n${USAGE}`);
    return 2;
  }
  const port = values.port === undefined ? undefined : Number(values.port);
  if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535)) {
    console.error(`--port must be an integer in 0..65535, got "${values.port}"`);
    return 2;
  }
  try {
    const config = await loadConfigFile(values.config);
    const router = await createRouter(config);
    const address = await router.serve({ hostname: values.host, port });
    jsonLog("tidegate listening", {
      url: `http://${address.hostname}:${address.port}`,
      models: config.models.map((m) => m.name),
    });
    await waitForShutdown();
    jsonLog("tidegate shutting down");
    await router.close();
    return 0;
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      return 2;
    }
    console.error(`tidegate failed to start: ${(error as Error).message}`);
    return 1;
  }
}

/** Resolves on the first SIGINT or SIGTERM. */
export function waitForShutdown(): Promise<void> {
  return new Promise((resolve) => {
    const signals: Deno.Signal[] = ["SIGINT", "SIGTERM"];
    const handler = () => {
      for (const signal of signals) Deno.removeSignalListener(signal, handler);
      resolve();
    };
    for (const signal of signals) Deno.addSignalListener(signal, handler);
  });
}

import { basename, dirname, resolve } from "node:path";
import { parseCommandArgs, parsePortFlag } from "./args.ts";
import { ConfigError, loadConfigFile } from "../src/config/load.ts";
import type { Config } from "../src/config/schema.ts";
import type { ReloadResult } from "../src/runtime/reload.ts";
import { createRouter, type Router } from "../routes/app.ts";
import { consoleToLog } from "../src/telemetry/console_log.ts";
import { createJsonLog, jsonLog, type LogFn, type LogLevel } from "../src/telemetry/json_log.ts";
import { checkConfigFile } from "./config_check.ts";
import { resolveLogLevel } from "./log_level.ts";

const USAGE = `Usage: deno task start --config FILE [--host HOST] [--port PORT]
                       [--log-level debug|info|warn|error] [--check]

Runs the router from a JSON or YAML config file (see deploy/examples/). Editing the file or
sending SIGHUP reloads it: instances are added, drained and removed without dropping requests,
and an invalid file is rejected with the reasons while the running config stays.

Logs are JSON lines on stderr: one per request at info (the access log), one per failure or
outage at warn. --log-level (or TIDEGATE_LOG_LEVEL) sets the lowest level written (default info).

--check validates the file completely (schema, policies, environment values, tokenizer files,
key scheme) without listening: exit 0 with a summary, or 2 with every problem.`;

export interface StartArgs {
  config: string;
  host: string | undefined;
  port: number | undefined;
  logLevel: LogLevel;
  check: boolean;
}

/** `start`'s flags, checked: the values, or the exit code when the command stops here. */
export function parseStartArgs(args: string[]): StartArgs | number {
  const parsed = parseCommandArgs(args, {
    config: { type: "string", short: "c" },
    host: { type: "string" },
    port: { type: "string" },
    "log-level": { type: "string" },
    check: { type: "boolean", default: false },
  }, USAGE);
  if (parsed.exit !== undefined) return parsed.exit;
  const { values } = parsed;
  if (!values.config) {
    console.error(`--config is required.\n\n${USAGE}`);
    return 2;
  }
  const port = parsePortFlag(values.port);
  const level = resolveLogLevel(values["log-level"], "info");
  const flagError = typeof port === "string" ? port : typeof level === "object" ? level.error : "";
  if (flagError) {
    console.error(flagError);
    return 2;
  }
  return {
    config: values.config,
    host: values.host,
    port: port as number | undefined,
    logLevel: level as LogLevel,
    check: values.check,
  };
}

/** `start`: serve from a config file until SIGINT/SIGTERM (or `--check` it). The exit code. */
export async function runStart(args: string[]): Promise<number> {
  const parsed = parseStartArgs(args);
  if (typeof parsed === "number") return parsed;
  if (parsed.check) return await runCheck(parsed.config);
  return await serveFromFile({
    path: parsed.config,
    host: parsed.host,
    port: parsed.port,
    log: createJsonLog(parsed.logLevel),
  });
}

/** `start --check`: like `nginx -t`, the verdict on the file and nothing else. */
async function runCheck(path: string): Promise<number> {
  const verdict = await checkConfigFile(path);
  if (verdict.ok) {
    console.log(verdict.summary.join("\n"));
    return 0;
  }
  console.error(
    `${path}: ${verdict.problems.length} problem${verdict.problems.length === 1 ? "" : "s"}:`,
  );
  for (const problem of verdict.problems) console.error(`  - ${problem}`);
  return 2;
}

/** How long `start` waits for its worker threads to load before it listens anyway. */
const WARM_TIMEOUT_MS = 30_000;

/** Serves until SIGINT/SIGTERM, then drains. Returns the exit code. */
async function serveFromFile(
  options: { path: string; host?: string; port?: number; log: LogFn },
): Promise<number> {
  const { log } = options;
  let listen = "";
  let restoreConsole: (() => void) | undefined;
  try {
    const config = await loadConfigFile(options.path);
    listen = `${options.host ?? config.listen.host}:${options.port ?? config.listen.port}`;
    const router = await createRouter(config, { log, configPath: options.path });
    // Listening once the workers have loaded: a long prompt then never waits for one.
    if (!await router.warm(WARM_TIMEOUT_MS)) {
      log("worker threads still loading; serving anyway (long prompts wait or go by load)", {
        level: "warn",
        waitedMs: WARM_TIMEOUT_MS,
      });
    }
    const address = await router.serve({ hostname: options.host, port: options.port });
    // From here on standard error is JSON lines only, whatever a library prints.
    restoreConsole = consoleToLog(log);
    log("tidegate listening", {
      url: `http://${address.hostname}:${address.port}`,
      models: config.models.map((m) => m.name),
    });
    warnOnOpenAdmin(address.hostname, config, log);
    const reloader = watchConfigFile({ path: options.path, router, log });
    await waitForShutdown();
    log("tidegate shutting down", { ...router.config.shutdown });
    const outcome = await router.drain({ ...router.config.shutdown, hurry: nextShutdownSignal() });
    await reloader.close();
    await router.close();
    log("tidegate stopped", { outcome });
    return 0;
  } catch (error) {
    restoreConsole?.();
    if (error instanceof ConfigError) {
      console.error(error.message);
      return 2;
    }
    const reason = error instanceof Deno.errors.AddrInUse
      ? `${listen} is already in use (another tidegate? change listen.port or --port)`
      : (error as Error).message;
    console.error(`tidegate failed to start: ${reason}`);
    return 1;
  } finally {
    restoreConsole?.();
  }
}

/** Reachable from other hosts with no admin token: say what that means for /admin. */
function warnOnOpenAdmin(hostname: string, config: Config, log: LogFn): void {
  const loopback = hostname === "localhost" || hostname === "::1" || hostname.startsWith("127.");
  if (loopback || config.admin.token) return;
  log("warning: no admin.token while listening beyond loopback", {
    level: "warn",
    listen: hostname,
    effect: "/admin answers only clients on this host; set admin.token (env:NAME) to manage " +
      "instances remotely",
  });
}

/** Aborts on the next SIGINT or SIGTERM: a second signal skips the rest of the drain. */
function nextShutdownSignal(): AbortSignal {
  const hurry = new AbortController();
  waitForShutdown().then(() => hurry.abort());
  return hurry.signal;
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

export interface ConfigWatchOptions {
  path: string;
  router: Pick<Router, "config" | "reload" | "metrics">;
  /** Quiet time after the last file event before reloading (editors write in steps). */
  debounceMs?: number;
  /** Also reload on SIGHUP (default true). */
  sighup?: boolean;
  load?: (path: string) => Promise<Config>;
  log?: (message: string, fields?: Record<string, unknown>) => void;
}

export interface ConfigWatch {
  /** Reads the file and applies it now; `undefined` when it could not be read or parsed. */
  reload(reason: string): Promise<ReloadResult | undefined>;
  close(): Promise<void>;
}

/**
 * Reloads the router when its config file changes or on SIGHUP. The file's directory is
 * watched, not the file, so replacing it (editors' atomic saves, Kubernetes ConfigMap symlink
 * swaps of `..data`) is seen too; a change that leaves the resolved config as it is does nothing.
 */
export function watchConfigFile(options: ConfigWatchOptions): ConfigWatch {
  const log = options.log ?? jsonLog;
  const load = options.load ?? ((path: string) => loadConfigFile(path));
  const reload = (reason: string, onlyIfChanged = false) =>
    reloadFromFile(options, { log, load }, reason, onlyIfChanged);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let chain: Promise<unknown> = Promise.resolve();
  let closed = false;
  const schedule = () => {
    // An event the watcher had buffered may still arrive after close(): no reload then.
    if (closed) return;
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      chain = chain.then(() => reload("file changed", true)).catch(() => {});
    }, options.debounceMs ?? 200);
  };
  const watch = watchFileEvents(resolve(options.path), schedule, log);
  const onHangup = () => {
    chain = chain.then(() => reload("SIGHUP")).catch(() => {});
  };
  const listening = (options.sighup ?? true) && addSignal("SIGHUP", onHangup);
  return {
    reload: (reason) => {
      const result = chain.then(() => reload(reason));
      chain = result.catch(() => {});
      return result;
    },
    async close() {
      closed = true;
      if (listening) Deno.removeSignalListener("SIGHUP", onHangup);
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      await watch.close();
      await chain;
    },
  };
}

/** Loads the file and applies it; an unreadable or invalid file is logged, counted, skipped. */
async function reloadFromFile(
  options: ConfigWatchOptions,
  io: { log: NonNullable<ConfigWatchOptions["log"]>; load: (path: string) => Promise<Config> },
  reason: string,
  onlyIfChanged: boolean,
): Promise<ReloadResult | undefined> {
  let config: Config;
  try {
    config = await io.load(options.path);
  } catch (error) {
    const problems = error instanceof ConfigError
      ? error.problems
      : [(error as Error)?.message ?? String(error)];
    io.log("config reload rejected, keeping the running config", {
      level: "warn",
      reason,
      problems,
    });
    options.router.metrics.reloads.inc({ outcome: "rejected" });
    return undefined;
  }
  if (onlyIfChanged && JSON.stringify(config) === JSON.stringify(options.router.config)) {
    return undefined;
  }
  io.log("config reload requested", { reason, path: options.path });
  return await options.router.reload(config);
}

/**
 * Calls `onChange` for events on the file, or on `..`-prefixed entries beside it (a Kubernetes
 * ConfigMap swaps its `..data` symlink). Its directory is watched: replacing the file counts.
 */
function watchFileEvents(
  path: string,
  onChange: () => void,
  log: NonNullable<ConfigWatchOptions["log"]>,
): { close(): Promise<void> } {
  const name = basename(path);
  const watcher = Deno.watchFs(dirname(path), { recursive: false });
  const watching = (async () => {
    try {
      for await (const event of watcher) {
        const relevant = event.paths.some((p) => {
          const base = basename(p);
          return base === name || base.startsWith("..");
        });
        if (relevant && event.kind !== "access") onChange();
      }
    } catch (error) {
      log("config file watch ended", {
        level: "warn",
        error: (error as Error)?.message ?? String(error),
      });
    }
  })();
  return {
    async close() {
      watcher.close();
      await watching;
    },
  };
}

/** Adds a signal listener; false where the platform has no such signal. */
function addSignal(signal: Deno.Signal, handler: () => void): boolean {
  try {
    Deno.addSignalListener(signal, handler);
    return true;
  } catch {
    return false; // no SIGHUP on this platform: file changes still reload
  }
}

/**
 * What libraries print with `console.*`, sent to the JSON log instead: the node:http adapter
 * prints a stack trace (and "The user aborted a request.") when writing an answer fails, and one
 * plain-text line among the JSON ones breaks every log collector that reads a line as one
 * object. Each call becomes one line at the matching level, marked `source: "console"`.
 */
import { format } from "node:util";
import type { LogFn, LogLevel } from "./json_log.ts";

const LEVEL_OF_METHOD = {
  debug: "debug",
  log: "info",
  info: "info",
  warn: "warn",
  error: "error",
} as const satisfies Record<string, LogLevel>;

type ConsoleMethod = keyof typeof LEVEL_OF_METHOD;
type Printing = Pick<Console, ConsoleMethod>;

/** Sends `target`'s printing methods to `log`; returns the function that puts them back. */
export function consoleToLog(log: LogFn, target: Printing = console): () => void {
  const saved = new Map<ConsoleMethod, Printing[ConsoleMethod]>();
  for (const method of Object.keys(LEVEL_OF_METHOD) as ConsoleMethod[]) {
    saved.set(method, target[method]);
    const level = LEVEL_OF_METHOD[method];
    target[method] = (...args: unknown[]) => log(format(...args), { level, source: "console" });
  }
  return () => {
    for (const [method, original] of saved) target[method] = original;
  };
}

/**
 * Structured logs: one JSON line per event on stderr. A line's level travels in its fields
 * (`{ level: "warn", ... }`; absent means `info`) so every log sink keeps the one signature
 * `(message, fields)` and only the sink at the edge decides what is written.
 */
import { bufferedStderr, type LineSink } from "./buffered_lines.ts";

export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
export type LogLevel = typeof LOG_LEVELS[number];

/** The log sink every part of the router is handed. */
export type LogFn = (message: string, fields?: Record<string, unknown>) => void;

export function isLogLevel(value: string): value is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(value);
}

/** The level a line was logged at (`info` when it names none or an unknown one). */
export function levelOf(fields: Record<string, unknown> | undefined): LogLevel {
  const level = fields?.level;
  return typeof level === "string" && isLogLevel(level) ? level : "info";
}

/**
 * A sink that writes lines at `minimum` or above as JSON, and drops the rest. By default lines go
 * to standard error, `info` and `debug` ones gathered per event-loop turn (buffered_lines.ts).
 */
export function createJsonLog(
  minimum: LogLevel = "info",
  write: (line: string, level: LogLevel) => void = toStderr,
): LogFn {
  const floor = LOG_LEVELS.indexOf(minimum);
  return (message, fields = {}) => {
    const level = levelOf(fields);
    if (LOG_LEVELS.indexOf(level) < floor) return;
    write(
      JSON.stringify({ time: new Date().toISOString(), level, msg: message, ...fields }),
      level,
    );
  };
}

let stderrSink: LineSink | undefined;

function toStderr(line: string, level: LogLevel): void {
  stderrSink ??= bufferedStderr();
  stderrSink.write(line, level === "warn" || level === "error");
}

/** The default log sink: every line at `info` or above. */
export const jsonLog: LogFn = createJsonLog("info");

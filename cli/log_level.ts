import { isLogLevel, LOG_LEVELS, type LogLevel } from "../src/telemetry/json_log.ts";

/** The environment variable that sets the log level when `--log-level` is not given. */
const LOG_LEVEL_ENV = "TIDEGATE_LOG_LEVEL";

/**
 * The minimum level of the log lines written: `--log-level`, else `TIDEGATE_LOG_LEVEL` (handy in
 * a container), else `fallback`. An error message when the chosen value is no level.
 */
export function resolveLogLevel(
  flag: string | undefined,
  fallback: LogLevel,
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): LogLevel | { error: string } {
  const fromEnv = env(LOG_LEVEL_ENV) || undefined;
  const value = flag ?? fromEnv;
  if (value === undefined) return fallback;
  if (isLogLevel(value)) return value;
  const source = flag !== undefined ? "--log-level" : LOG_LEVEL_ENV;
  return { error: `${source} must be one of ${LOG_LEVELS.join(", ")}, got "${value}"` };
}

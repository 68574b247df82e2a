import { ConfigError, type ConfigSourceOptions, resolveConfig } from "../../src/config/load.ts";

/** What `resolveConfig` reports for `raw`, one line a problem; [] when it is valid. */
export function problemsOf(raw: unknown, options: ConfigSourceOptions = {}): string[] {
  try {
    resolveConfig(raw, options);
    return [];
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
}

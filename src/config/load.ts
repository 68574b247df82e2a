import { dirname, isAbsolute, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import type { z } from "zod";
import { didYouMean } from "./did_you_mean.ts";
import { type Config, ConfigSchema } from "./schema.ts";
import { knownKeysAt, valueAt } from "./schema_walk.ts";

/** Every problem found in a configuration, each with the path of the field at fault. */
export class ConfigError extends Error {
  constructor(readonly problems: string[], source = "config") {
    super(`Invalid ${source}:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

/** `models[0].instances[1].url` from zod's `["models", 0, "instances", 1, "url"]`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out || "(root)";
}

/** One zod issue as a line, with the closest valid name for an unknown field or option. */
function describeIssue(issue: z.core.$ZodIssue, raw: unknown): string {
  if (issue.code === "unrecognized_keys") {
    const known = knownKeysAt(ConfigSchema, issue.path);
    return issue.keys.map((key) =>
      `${formatPath([...issue.path, key])}: unknown field${didYouMean(key, known)}`
    ).join("\n");
  }
  if (issue.code === "invalid_value") {
    const given = valueAt(raw, issue.path);
    const options = issue.values.filter((v): v is string => typeof v === "string");
    const hint = typeof given === "string" ? didYouMean(given, options) : "";
    return `${formatPath(issue.path)}: ${issue.message}${hint}`;
  }
  return `${formatPath(issue.path)}: ${issue.message}`;
}

/** The top-level sections whose fields may read `env:NAME`. */
export type EnvSection = "admin" | "cluster" | "tenants";

export interface ConfigSourceOptions {
  /** Relative paths in the config (tokenizer directories) resolve against this directory. */
  baseDir?: string;
  /** Where `env:NAME` values are read from. */
  env?: (name: string) => string | undefined;
  /**
   * Sections whose `env:NAME` values are neither required nor read: they stay `env:NAME` as
   * written. For tools that never use those sections (`keys` serves nothing, so it needs no admin
   * token); a router must not run from such a config.
   */
  leaveEnvIn?: readonly EnvSection[];
  source?: string;
}

/** Validates a parsed config object; throws ConfigError listing every problem. */
export function resolveConfig(raw: unknown, options: ConfigSourceOptions = {}): Config {
  const env = options.env ?? (() => undefined);
  const wanted = envFieldFilter(options.leaveEnvIn);
  const result = ConfigSchema.safeParse(raw);
  // Unset environment values are read from the file as written, so they are reported even
  // beside schema problems.
  const problems = unsetEnvProblems(raw, env, wanted);
  if (!result.success) {
    problems.unshift(
      ...result.error.issues.flatMap((issue) => describeIssue(issue, raw).split("\n")),
    );
  }
  if (problems.length || !result.success) throw new ConfigError(problems, options.source);
  const config = result.data;
  // The same fields as were checked above: every `env:NAME` is set by now.
  for (const path of envFields(config).filter(wanted)) {
    const value = valueAt(config, path);
    if (typeof value === "string" && value.startsWith("env:")) {
      const parent = valueAt(config, path.slice(0, -1)) as Record<PropertyKey, unknown>;
      parent[path.at(-1) as string] = env(value.slice(4));
    }
  }
  for (const model of config.models) {
    const path = model.tokenizer.path;
    if (path && options.baseDir && !path.startsWith("builtin:") && !isAbsolute(path)) {
      model.tokenizer.path = resolve(options.baseDir, path);
    }
  }
  const frozen = deepFreeze(config);
  // A config with env values left as written must not pass for one a router can run from.
  if (!options.leaveEnvIn?.length) RESOLVED.add(frozen);
  return frozen;
}

/** The configs resolveConfig produced (validated, env values read, frozen). */
const RESOLVED = new WeakSet<object>();

/** True for a config resolveConfig produced; anything else must be validated before use. */
export function isResolvedConfig(value: unknown): value is Config {
  return typeof value === "object" && value !== null && RESOLVED.has(value);
}

/** The fields that may read `env:NAME`. */
const ENV_FIELDS: readonly (readonly PropertyKey[])[] = [
  ["admin", "token"],
  ["cluster", "sharedState", "redis"],
];

/** Every field that may hold `env:NAME`: the fixed ones and each tenant identity. */
function envFields(raw: unknown): (readonly PropertyKey[])[] {
  const tenants = valueAt(raw, ["tenants", "list"]);
  const identities = Array.isArray(tenants)
    ? tenants.flatMap((tenant, t) => {
      const match = (tenant as { match?: unknown } | null)?.match;
      return Array.isArray(match) ? match.map((_, i) => ["tenants", "list", t, "match", i]) : [];
    })
    : [];
  return [...ENV_FIELDS, ...identities];
}

/** Which env fields are read: all but those of the sections left as written. */
function envFieldFilter(
  leave: readonly EnvSection[] = [],
): (path: readonly PropertyKey[]) => boolean {
  return (path) => !leave.includes(path[0] as EnvSection);
}

/** An `env:NAME` value whose variable is unset or empty, per field. */
function unsetEnvProblems(
  raw: unknown,
  env: (name: string) => string | undefined,
  wanted: (path: readonly PropertyKey[]) => boolean,
): string[] {
  return envFields(raw).filter(wanted).flatMap((path) => {
    const value = valueAt(raw, path);
    if (typeof value !== "string" || !value.startsWith("env:")) return [];
    const name = value.slice(4);
    return env(name)
      ? []
      : [`${formatPath(path)}: environment variable ${name} is not set or empty`];
  });
}

/** Parses YAML text (a `.yaml` or `.yml` source) or JSON (anything else) and validates it. */
export function parseConfigText(
  text: string,
  fileName: string,
  options: ConfigSourceOptions = {},
): Config {
  let raw: unknown;
  const yaml = /\.ya?ml$/i.test(fileName);
  try {
    raw = yaml ? parseYaml(text) : JSON.parse(text);
  } catch (error) {
    throw new ConfigError(
      [`cannot parse ${yaml ? "YAML" : "JSON"}: ${(error as Error).message}`],
      options.source ?? fileName,
    );
  }
  return resolveConfig(raw, { source: fileName, ...options });
}

/** Reads and validates a config file; relative paths inside resolve against its directory. */
export async function loadConfigFile(
  path: string,
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
  options: Pick<ConfigSourceOptions, "leaveEnvIn"> = {},
): Promise<Config> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    throw new ConfigError([`cannot read ${path}: ${(error as Error).message}`], path);
  }
  return parseConfigText(text, path, { ...options, baseDir: dirname(resolve(path)), env });
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

import { parseArgs, type ParseArgsConfig } from "node:util";

type Options = NonNullable<ParseArgsConfig["options"]>;

/**
 * Parses a command's flags (plus `-h/--help`): the values, or the exit code when the command
 * should stop here (2 after printing what is wrong and the usage, 0 after printing the usage).
 */
export function parseCommandArgs<const O extends Options>(
  args: string[],
  options: O,
  usage: string,
  out: (line: string) => void = console.log,
) {
  if (args.includes("-h") || args.includes("--help")) {
    out(usage);
    return { exit: 0 };
  }
  try {
    return { values: parseArgs({ args, options }).values, exit: undefined };
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${usage}`);
    return { exit: 2 };
  }
}

/** A TCP port flag: undefined when absent, an error message when not 0..65535. */
export function parsePortFlag(
  value: string | undefined,
  flag = "--port",
): number | undefined | string {
  if (value === undefined) return undefined;
  const port = Number(value);
  return Number.isInteger(port) && port >= 0 && port <= 65535
    ? port
    : `${flag} must be an integer in 0..65535, got "${value}"`;
}

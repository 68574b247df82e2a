/**
 * The command line: `tidegate <start|demo|keys|sim> ...` (from source: `deno run -A cli/main.ts`,
 * or the `deno task` of each command). Each command's module is loaded only when it runs.
 */
const COMMANDS =
  `Usage: tidegate <command> [options]   (from source: deno run -A cli/main.ts <command> ...)

Commands:
  start --config FILE      run the router from a config file
  demo [--port N]          run the router on an embedded simulated cluster
  keys --config FILE ...   print (and --probe) the store keys of a prompt
  sim --trace FILE ...     replay a Mooncake trace through the scheduling policies
  sim-grid [--quick]       every policy on the grid of workloads nobody tuned on`;

type Runner = (rest: string[]) => Promise<number>;

const RUNNERS: Record<string, Runner> = {
  start: async (rest) => (await import("./start.ts")).runStart(rest),
  demo: async (rest) => (await import("./demo.ts")).runDemo(rest),
  keys: async (rest) => (await import("./keys.ts")).runKeys(rest),
  sim: async (rest) => (await import("./sim.ts")).runSimCli(rest),
  "sim-grid": async (rest) => (await import("./sim_grid.ts")).runSimGrid(rest),
};

/**
 * The command a command line names (its first argument) and the arguments left for it, or
 * undefined when the first argument is no command. `main` dispatches through it; the deploy tests
 * run the pod's command line through it too.
 */
export function resolveCommand(
  args: string[],
): { command: string; rest: string[]; run: Runner } | undefined {
  const [command, ...rest] = args;
  const run = command !== undefined && Object.hasOwn(RUNNERS, command)
    ? RUNNERS[command]
    : undefined;
  return run ? { command: command!, rest, run } : undefined;
}

/** The command-line entry point; returns the process exit code. */
export async function main(args: string[]): Promise<number> {
  const resolved = resolveCommand(args);
  if (resolved) return await resolved.run(resolved.rest);
  const command = args[0];
  switch (command) {
    case undefined:
    case "help":
    case "--help":
    case "-h":
      console.log(COMMANDS);
      return command === undefined ? 2 : 0;
    default:
      console.error(`Unknown command "${command}".\n\n${COMMANDS}`);
      return 2;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));

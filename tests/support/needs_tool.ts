/**
 * Tests that drive a program from outside the repository (redis-server, promtool, Chromium).
 * Where the program is missing, such a test is ignored, saying why in its name and on the
 * console, so the summary counts it as ignored and never as passed. In CI (`TIDEGATE_CI=1`,
 * exported by .ci/run, which installs every such program) a missing program fails the test
 * instead. Tests never install anything themselves.
 */

/** Whether this run is CI's, where every program the tests drive must be there. */
export const IN_CI = Deno.env.get("TIDEGATE_CI") === "1";

/**
 * Why `command args` cannot run here (not installed, or failing), or undefined when it runs.
 * `install` says how to get it, e.g. "apt-get install -y redis-server". With `anyExit` it only
 * has to start (`wrk --version` prints its version and exits 1).
 */
export async function commandMissing(
  command: string,
  args: string[],
  install: string,
  options: { anyExit?: boolean } = {},
): Promise<string | undefined> {
  try {
    const { success } = await new Deno.Command(command, { args, stdout: "null", stderr: "null" })
      .output();
    if (success || options.anyExit) return undefined;
    return `\`${command} ${args.join(" ")}\` fails here (${install})`;
  } catch {
    return `${command} is not installed (${install})`;
  }
}

/** Why there is no file at `path`, or undefined when there is one. */
export function fileMissing(path: string, install: string): string | undefined {
  try {
    if (Deno.statSync(path).isFile) return undefined;
  } catch {
    // absent: said below
  }
  return `no ${path} (${install})`;
}

/**
 * Registers a test that needs a program; `missing` says why it cannot be had here (undefined:
 * it can). Outside CI the test is then ignored with that reason; in CI it fails with it.
 */
export function testNeeding(missing: string | undefined, definition: Deno.TestDefinition): void {
  if (missing === undefined) {
    Deno.test(definition);
  } else if (IN_CI) {
    Deno.test({
      ...definition,
      fn: () => {
        throw new Error(`${missing}: TIDEGATE_CI=1 runs every test, so the program must be there`);
      },
    });
  } else {
    console.warn(`ignored "${definition.name}": ${missing}`);
    Deno.test({ ...definition, name: `${definition.name} [ignored: ${missing}]`, ignore: true });
  }
}

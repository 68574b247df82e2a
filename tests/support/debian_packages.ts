/**
 * Servers that tests and benchmarks need come from Debian: when a command is missing and this
 * process may run apt-get (root on a Debian-like machine), install its package once; otherwise
 * say how. Returns the commands still missing.
 */
export async function ensureDebianCommands(
  needed: { command: string; versionArgs: string[]; pkg: string }[],
): Promise<string[]> {
  const missing = [];
  for (const need of needed) {
    if (!await runs(need.command, need.versionArgs)) missing.push(need);
  }
  if (missing.length === 0) return [];
  const packages = missing.map((m) => m.pkg);
  if (Deno.uid() === 0 && await runs("apt-get", ["--version"])) {
    console.error(`Installing ${packages.join(", ")} with apt-get...`);
    const env = { DEBIAN_FRONTEND: "noninteractive" };
    await quietly("apt-get", ["update"], env);
    await quietly("apt-get", ["install", "-y", ...packages], env);
  }
  const still = [];
  for (const need of missing) {
    if (!await runs(need.command, need.versionArgs)) still.push(need.command);
  }
  return still;
}

async function runs(command: string, args: string[]): Promise<boolean> {
  try {
    await new Deno.Command(command, { args, stdout: "null", stderr: "null" }).output();
    return true;
  } catch {
    return false;
  }
}

async function quietly(command: string, args: string[], env: Record<string, string>) {
  const { success, stderr } = await new Deno.Command(command, { args, env, stdout: "null" })
    .output();
  if (!success) console.error(new TextDecoder().decode(stderr).slice(-2000));
}

/** Runs `fn` with console.log and console.error captured: the CLI prints, the tests read it. */
export async function quietly<T>(
  fn: () => Promise<T>,
): Promise<{ value: T; out: string; errors: string }> {
  const log = console.log, error = console.error;
  let out = "", errors = "";
  console.log = (...parts: unknown[]) => out += parts.join(" ") + "\n";
  console.error = (...parts: unknown[]) => errors += parts.join(" ") + "\n";
  try {
    return { value: await fn(), out, errors };
  } finally {
    console.log = log;
    console.error = error;
  }
}

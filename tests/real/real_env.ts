/**
 * Where the real programs of the real-engine suite live (tests/real/setup.sh puts them there) and
 * the check that they do: a test that needs them fails, never skips, with the command that
 * installs them.
 */
import { eventually } from "../support/eventually.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

export const REAL = {
  root: ROOT,
  python: `${ROOT}.venv/bin/python`,
  mooncakeMaster: `${ROOT}.venv/bin/mooncake_master`,
  model: `${ROOT}.cache/real/tiny-qwen3`,
  /** The same tokenizer on a larger random model, where prefill dominates (make_tiny_qwen3.py). */
  prefillModel: `${ROOT}.cache/real/prefill-qwen3`,
  /** The name the engines serve either model under. */
  modelName: "tiny-qwen3",
};

/** Throws (the test fails) unless the real programs are installed. */
export function requireRealPrograms(): void {
  const missing = [REAL.python, REAL.mooncakeMaster, `${REAL.model}/model.safetensors`]
    .filter((path) => !exists(path));
  if (missing.length > 0) {
    throw new Error(
      `the real-engine suite needs ${missing.join(", ")}: run \`npx -y deno@2.9.6 task ` +
        "setup:real` (tests/real/setup.sh) first",
    );
  }
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

export { freePort } from "../support/free_port.ts";

/** Waits until `url` answers 200; fails when the process dies or `timeoutMs` passes. */
export async function waitForOk(
  url: string,
  timeoutMs: number,
  alive: () => boolean,
  what: string,
): Promise<void> {
  await eventually(
    async () => {
      if (!alive()) throw new Error(`${what} exited before ${url} answered`);
      try {
        const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
        await response.body?.cancel();
        return response.status === 200;
      } catch {
        return false; // not listening yet
      }
    },
    timeoutMs,
    `${what}: ${url} to answer 200`,
  );
}

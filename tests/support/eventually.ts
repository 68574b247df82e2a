/**
 * The one way a test waits for what nothing tells it about: poll a condition until it holds, and
 * fail naming what was awaited (and what was last seen) when it never does. Tests wait on
 * conditions or events, never for a fixed time (docs/testing.md).
 */

/** Often enough not to slow a test down, rarely enough to leave the machine to the code under test. */
const POLL_MS = 10;

/** What a timed-out wait says: a fixed text, or one written when the wait fails (the last state). */
export type Described = string | (() => string);

/** Polls until `check` holds (or fails the test after `timeoutMs`); `check` may be async. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 2_000,
  what: Described = "condition",
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) {
      const described = typeof what === "function" ? what() : what;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${described}`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/**
 * Polls until `find` returns a value (not undefined) and returns it; fails after `timeoutMs`.
 * `find` may be async.
 */
export async function waitFor<T>(
  find: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 2_000,
  what: Described = "condition",
): Promise<T> {
  let found: T | undefined;
  await eventually(async () => (found = await find()) !== undefined, timeoutMs, what);
  return found!;
}

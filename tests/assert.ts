/**
 * Test assertions with @std/assert's names, over `node:assert` (JSR is out of reach here).
 */
import nodeAssert from "node:assert/strict";

export function assert(condition: unknown, message?: string): asserts condition {
  nodeAssert.ok(condition, message);
}

export function assertEquals<T>(actual: T, expected: T, message?: string): void {
  nodeAssert.deepStrictEqual(actual, expected, message);
}

export function assertNotEquals<T>(actual: T, expected: T, message?: string): void {
  nodeAssert.notDeepStrictEqual(actual, expected, message);
}

export function assertMatch(actual: string, pattern: RegExp, message?: string): void {
  nodeAssert.match(actual, pattern, message);
}

export function assertAlmostEquals(actual: number, expected: number, tolerance = 1e-7): void {
  nodeAssert.ok(
    Math.abs(actual - expected) <= tolerance,
    `expected ${actual} to be within ${tolerance} of ${expected}`,
  );
}

// deno-lint-ignore no-explicit-any
type ErrorClass<E extends Error = Error> = new (...args: any[]) => E;

function check<E extends Error>(error: unknown, errorClass?: ErrorClass<E>, includes?: string): E {
  if (!(error instanceof Error)) throw new Error(`expected an Error, got ${String(error)}`);
  if (errorClass && !(error instanceof errorClass)) {
    const actual = error as Error;
    throw new Error(`expected ${errorClass.name}, got ${actual.name}: ${actual.message}`);
  }
  if (includes && !error.message.includes(includes)) {
    throw new Error(`expected the message to include "${includes}", got "${error.message}"`);
  }
  return error as E;
}

/** The error `fn` throws, typed as `errorClass`'s instances. */
export function assertThrows<E extends Error = Error>(
  fn: () => unknown,
  errorClass?: ErrorClass<E>,
  includes?: string,
): E {
  try {
    fn();
  } catch (error) {
    return check(error, errorClass, includes);
  }
  throw new Error("expected the function to throw");
}

/** The error `fn`'s promise rejects with, typed as `errorClass`'s instances. */
export async function assertRejects<E extends Error = Error>(
  fn: () => Promise<unknown>,
  errorClass?: ErrorClass<E>,
  includes?: string,
): Promise<E> {
  try {
    await fn();
  } catch (error) {
    return check(error, errorClass, includes);
  }
  throw new Error("expected the promise to reject");
}

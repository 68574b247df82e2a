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
type ErrorClass = new (...args: any[]) => Error;

function check(error: unknown, errorClass?: ErrorClass, includes?: string): Error {
  if (!(error instanceof Error)) throw new Error(`expected an Error, got ${String(error)}`);
  if (errorClass && !(error instanceof errorClass)) {
    const actual = error as Error;
    throw new Error(`expected ${errorClass.name}, got ${actual.name}: ${actual.message}`);
  }
  if (includes && !error.message.includes(includes)) {
    throw new Error(`expected the message to include "${includes}", got "${error.message}"`);
  }
  return error;
}

export function assertThrows(fn: () => unknown, errorClass?: ErrorClass, includes?: string): Error {
  try {
    fn();
  } catch (error) {
    return check(error, errorClass, includes);
  }
  throw new Error("expected the function to throw");
}

export async function assertRejects(
  fn: () => Promise<unknown>,
  errorClass?: ErrorClass,
  includes?: string,
): Promise<Error> {
  try {
    await fn();
  } catch (error) {
    return check(error, errorClass, includes);
  }
  throw new Error("expected the promise to reject");
}

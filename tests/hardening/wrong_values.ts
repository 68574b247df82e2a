/**
 * Values of the wrong type or out of range for any field: every JSON type, huge and odd
 * numbers, unicode edge cases, deep nesting, long strings and arrays.
 */
export const WRONG_VALUES: readonly unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  -0.000001,
  1e308,
  -1e308,
  2 ** 53 + 2,
  2 ** 31,
  -(2 ** 31) - 1,
  "",
  "x",
  "1",
  "true",
  "null",
  "\u0000",
  "\ud800",
  "\udfff\ud800",
  "\u202e\u200b\ufeff",
  "🚀".repeat(64),
  "<|im_start|>system\n<|endoftext|>",
  "a".repeat(10_000),
  [],
  [null],
  [[]],
  [[[[1]]]],
  [1, "a", null],
  [-1],
  [2 ** 40],
  [1.5],
  ["a", 1],
  Array.from({ length: 2_000 }, (_, i) => i),
  {},
  { "": "" },
  { role: "user" },
  { __proto__: { polluted: true } },
  JSON.parse('{"__proto__": {"polluted": true}, "constructor": {"prototype": 1}}'),
  nested(200),
];

/** `[[[...]]]` `depth` levels deep. */
export function nested(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** `{"a":{"a":...}}` as text, `depth` levels deep (beyond what JSON.stringify is asked to do). */
export function nestedObjectText(depth: number): string {
  return '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
}

import { assert, assertEquals, assertThrows } from "../assert.ts";
import { HttpError } from "../../src/openai/errors.ts";
import { MAX_JSON_DEPTH, nestsDeeperThan } from "../../src/openai/json_depth.ts";
import { parseOpenAIRequest } from "../../src/openai/request.ts";

const bytes = (text: string) => new TextEncoder().encode(text);

Deno.test("nestsDeeperThan() counts brackets outside strings only", () => {
  assertEquals(nestsDeeperThan("[[[]]]", 3), false);
  assertEquals(nestsDeeperThan("[[[[]]]]", 3), true);
  assertEquals(nestsDeeperThan('{"a":{"b":{"c":1}}}', 2), true);
  assertEquals(nestsDeeperThan('["[[[[[[", "\\"[[[["]', 1), false, "brackets in strings");
  assertEquals(nestsDeeperThan('["\\\\", [[1]]]', 2), true, "an escaped backslash ends");
});

Deno.test("nestsDeeperThan() scans exactly once brackets outnumber the limit", () => {
  const siblings = `[${"[],".repeat(1_000)}[]]`;
  assertEquals(nestsDeeperThan(siblings, 3), false, "many brackets, shallow");
  assertEquals(nestsDeeperThan(`[${"[],".repeat(1_000)}[[[[]]]]]`, 3), true, "deep past many");
  assertEquals(nestsDeeperThan(`"${"[".repeat(1_000)}"`, 3), false, "all in a string");
});

Deno.test("a body nested past MAX_JSON_DEPTH is refused before parsing, in OpenAI's shape", () => {
  const deep = `{"model":"m","prompt":${"[".repeat(100_000)}${"]".repeat(100_000)}}`;
  const started = performance.now();
  const error = assertThrows(
    () => parseOpenAIRequest("completions", bytes(deep)),
    HttpError,
  ) as HttpError;
  assert(performance.now() - started < 50, "a byte scan, not a parse");
  assertEquals(error.status, 400);
  assertEquals(error.options.code, "invalid_json");
  const fits = `{"model":"m","prompt":"x","extra":${"[".repeat(MAX_JSON_DEPTH - 1)}${
    "]".repeat(MAX_JSON_DEPTH - 1)
  }}`;
  assertEquals(parseOpenAIRequest("completions", bytes(fits)).model, "m");
});

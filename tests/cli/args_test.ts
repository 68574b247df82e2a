import { assertEquals } from "../assert.ts";
import { parseCommandArgs, parsePortFlag } from "../../cli/args.ts";

Deno.test("parseCommandArgs() returns the values, 0 after --help, 2 after an unknown flag", () => {
  const printed: string[] = [];
  const options = { port: { type: "string" } } as const;
  const parsed = parseCommandArgs(["--port", "80"], options, "usage", (l) => printed.push(l));
  assertEquals({ ...parsed.values }, { port: "80" });
  assertEquals(parseCommandArgs(["-h"], options, "usage", (l) => printed.push(l)).exit, 0);
  assertEquals(printed, ["usage"]);
  const quiet = console.error;
  console.error = () => {};
  try {
    assertEquals(parseCommandArgs(["--nope"], options, "usage").exit, 2);
  } finally {
    console.error = quiet;
  }
});

Deno.test("parsePortFlag() accepts 0..65535 and names the flag otherwise", () => {
  assertEquals(parsePortFlag(undefined), undefined);
  assertEquals(parsePortFlag("0"), 0);
  assertEquals(parsePortFlag("8080"), 8080);
  assertEquals(parsePortFlag("70000"), '--port must be an integer in 0..65535, got "70000"');
  assertEquals(
    parsePortFlag("abc", "--listen"),
    '--listen must be an integer in 0..65535, got "abc"',
  );
});

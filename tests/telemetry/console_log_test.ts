import { assertEquals, assertMatch } from "../assert.ts";
import { consoleToLog } from "../../src/telemetry/console_log.ts";

function fakeConsole() {
  const printed: unknown[][] = [];
  const print = (...args: unknown[]) => void printed.push(args);
  return { printed, target: { debug: print, log: print, info: print, warn: print, error: print } };
}

Deno.test("console calls become one log line each, at the method's level, until put back", () => {
  const lines: { message: string; fields?: Record<string, unknown> }[] = [];
  const { printed, target } = fakeConsole();
  const restore = consoleToLog((message, fields) => lines.push({ message, fields }), target);
  target.error(new Error("the socket closed"));
  target.info("The user aborted a request.");
  target.log("%d chunks of %s", 3, "text", { left: 1 });
  target.warn("careful");
  target.debug("detail");
  assertEquals(lines.map((l) => l.fields), [
    { level: "error", source: "console" },
    { level: "info", source: "console" },
    { level: "info", source: "console" },
    { level: "warn", source: "console" },
    { level: "debug", source: "console" },
  ]);
  assertMatch(lines[0].message, /^Error: the socket closed\n\s+at /);
  assertEquals(lines[2].message, "3 chunks of text { left: 1 }");
  assertEquals(printed.length, 0);
  restore();
  target.error("after");
  assertEquals(lines.length, 5);
  assertEquals(printed, [["after"]]);
});

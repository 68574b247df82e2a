/** The log sink: JSON lines with a level, filtered at the configured minimum. */
import { assertEquals } from "../assert.ts";
import { createJsonLog, levelOf } from "../../src/telemetry/json_log.ts";

function sink(minimum: Parameters<typeof createJsonLog>[0]) {
  const lines: Record<string, unknown>[] = [];
  const log = createJsonLog(minimum, (line) => lines.push(JSON.parse(line)));
  return { log, lines };
}

Deno.test("a line at or above the minimum level is written as JSON with its level", () => {
  const { log, lines } = sink("warn");
  log("store down", { level: "warn", url: "http://m:9003" });
  log("crash", { level: "error" });
  assertEquals(lines.map((l) => [l.level, l.msg]), [["warn", "store down"], ["error", "crash"]]);
  assertEquals(lines[0].url, "http://m:9003");
  assertEquals(typeof lines[0].time, "string");
});

Deno.test("lines below the minimum are dropped; a line naming no level is info", () => {
  const { log, lines } = sink("warn");
  log("request", { level: "info" });
  log("no level given");
  log("detail", { level: "debug" });
  assertEquals(lines, []);
  const all = sink("debug");
  all.log("no level given");
  all.log("detail", { level: "debug" });
  assertEquals(all.lines.map((l) => l.level), ["info", "debug"]);
});

Deno.test("levelOf reads a known level and falls back to info", () => {
  assertEquals(levelOf({ level: "error" }), "error");
  assertEquals(levelOf({ level: "loud" }), "info");
  assertEquals(levelOf(undefined), "info");
});

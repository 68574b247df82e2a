/** Log lines gathered per event-loop turn, urgent ones at once, and none lost when the process ends. */
import { assertEquals } from "../assert.ts";
import { bufferedLines } from "../../src/telemetry/buffered_lines.ts";

function recorder() {
  const writes: string[] = [];
  const scheduled: (() => void)[] = [];
  const sink = bufferedLines(
    (bytes) => writes.push(new TextDecoder().decode(bytes)),
    (flush) => scheduled.push(flush),
  );
  return { sink, writes, scheduled };
}

Deno.test("lines of one turn are written together when the scheduled flush runs", () => {
  const { sink, writes, scheduled } = recorder();
  sink.write("a", false);
  sink.write("b", false);
  assertEquals(writes, []);
  assertEquals(scheduled.length, 1, "one flush per turn");
  scheduled[0]();
  assertEquals(writes, ["a\nb\n"]);
  sink.write("c", false);
  assertEquals(scheduled.length, 2);
  scheduled[1]();
  assertEquals(writes, ["a\nb\n", "c\n"]);
});

Deno.test("an urgent line is written at once, after the lines before it", () => {
  const { sink, writes, scheduled } = recorder();
  sink.write("request", false);
  sink.write("store down", true);
  assertEquals(writes, ["request\nstore down\n"]);
  scheduled[0]();
  assertEquals(writes.length, 1, "nothing left for the turn's flush");
});

Deno.test("a turn's lines past 64 KiB are written without waiting", () => {
  const { sink, writes } = recorder();
  const line = "x".repeat(1000);
  for (let i = 0; i < 70; i++) sink.write(line, false);
  assertEquals(writes.length, 1);
  assertEquals(writes[0].split("\n").length - 1, 66);
});

async function linesOfChild(ending: string): Promise<string[]> {
  const code = `import { createJsonLog } from ${
    JSON.stringify(new URL("../../src/telemetry/json_log.ts", import.meta.url).href)
  };
const log = createJsonLog("info");
log("first");
log("second");
${ending}`;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "-"],
    stdin: "piped",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const writer = out.stdin.getWriter();
  await writer.write(new TextEncoder().encode(code));
  await writer.close();
  const { stderr } = await out.output();
  return new TextDecoder().decode(stderr).split("\n").filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l).msg);
}

Deno.test("buffered lines reach stderr when the process exits or dies of an uncaught error", async () => {
  assertEquals(await linesOfChild(""), ["first", "second"]);
  assertEquals(await linesOfChild("Deno.exit(3);"), ["first", "second"]);
  assertEquals(await linesOfChild('throw new Error("boom");'), ["first", "second"]);
  assertEquals(await linesOfChild('Promise.reject(new Error("boom"));'), ["first", "second"]);
});

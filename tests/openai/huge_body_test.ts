/**
 * One request must not take the router down: bodies under the 32 MiB limit with millions of
 * elements are parsed or rejected in bounded time and memory. Each case runs in a child process
 * whose V8 heap is capped at 256 MB; a validator that records an issue or allocates a result per
 * element (zod's union of arrays did, for 16.7 M token ids) dies there instead of answering.
 */
import { assert, assertEquals } from "../assert.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const CHILD = "tests/openai/huge_body_child.ts";
const HEAP_MB = 256;

interface Outcome {
  ok: boolean;
  kind?: string;
  count?: number;
  status?: number;
  param?: string;
  message?: string;
  bodyBytes: number;
  parseMs: number;
}

async function parseInChild(name: string): Promise<Outcome> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", `--v8-flags=--max-old-space-size=${HEAP_MB}`, CHILD, name],
    cwd: ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
    signal: AbortSignal.timeout(120_000),
  }).output();
  const stdout = new TextDecoder().decode(output.stdout).trim();
  const stderr = new TextDecoder().decode(output.stderr);
  // V8's dying words ("Fatal JavaScript out of memory ...") rather than its GC trace.
  const why = stderr.split("\n").filter((line) => /fatal|error/i.test(line)).join("\n");
  assert(
    output.success,
    `${name}: child exited with ${output.code} (signal ${output.signal}): ${why || stderr}`,
  );
  const outcome = JSON.parse(stdout.split("\n").at(-1)!) as Outcome;
  assert(outcome.bodyBytes < 32 * 1024 * 1024, `${name}: body over the limit`);
  // A few tens of milliseconds here; the bound leaves room for a loaded machine.
  assert(outcome.parseMs < 10_000, `${name}: parsing took ${outcome.parseMs} ms`);
  return outcome;
}

Deno.test("parseOpenAIRequest() takes 4 M token ids in a 256 MB heap", async () => {
  const outcome = await parseInChild("token-ids");
  assertEquals([outcome.ok, outcome.kind, outcome.count], [true, "tokens", 4_000_000]);
});

Deno.test("parseOpenAIRequest() rejects 1 M strings ending in a number with one 400 in a 256 MB heap", async () => {
  const outcome = await parseInChild("strings-then-number");
  assertEquals([outcome.ok, outcome.status, outcome.param], [false, 400, "prompt"]);
  assertEquals(
    outcome.message,
    "Invalid 'prompt': must be a string, an array of strings, an array of token ids, or an array of token-id arrays",
  );
});

Deno.test("parseOpenAIRequest() rejects 4 M numbers as messages or stop sequences at the first, in a 256 MB heap", async () => {
  const messages = await parseInChild("messages-of-numbers");
  assertEquals([messages.ok, messages.status, messages.param], [false, 400, "messages[0]"]);
  assertEquals(
    messages.message,
    "Invalid 'messages[0]': Invalid input: expected object, received number",
  );
  const stop = await parseInChild("stop-of-numbers");
  assertEquals([stop.ok, stop.status, stop.param], [false, 400, "stop[0]"]);
});

import { assert, assertEquals, assertMatch } from "../assert.ts";
import { runSimGrid } from "../../cli/sim_grid.ts";

/** runSimGrid's exit code and what it printed to stderr and stdout. */
async function run(args: string[]): Promise<{ code: number; stderr: string; stdout: string }> {
  const printed: string[] = [];
  const table: string[] = [];
  const [error, log] = [console.error, console.log];
  console.error = (...parts: unknown[]) => printed.push(parts.join(" "));
  console.log = (...parts: unknown[]) => table.push(parts.join(" "));
  try {
    const code = await runSimGrid(args);
    return { code, stderr: printed.join("\n"), stdout: table.join("\n") };
  } finally {
    [console.error, console.log] = [error, log];
  }
}

Deno.test("sim:grid refuses a candidate it cannot run before replaying anything", async () => {
  const unknown = await run(["--candidate", "nope"]);
  assertEquals(unknown.code, 2);
  assertMatch(unknown.stderr, /--candidate: unknown policy "nope"/);
  const param = await run(["--candidate", "affinity_ttft:bogusWeight=1"]);
  assertEquals(param.code, 2);
  assertMatch(
    param.stderr,
    /--candidate: Invalid parameters for policy "affinity_ttft".*bogusWeight/,
  );
  const syntax = await run(["--candidate", "affinity_ttft:duplicationWeight"]);
  assertEquals(syntax.code, 2);
  assertMatch(syntax.stderr, /"duplicationWeight" is not key=number/);
});

Deno.test("sim:grid refuses a late-binding bound that is not a whole number of tokens", async () => {
  for (const bad of ["-1", "1.5", "lots", ""]) {
    const refused = await run([`--candidate-hold=${bad}`]);
    assertEquals(refused.code, 2, bad);
    assertMatch(refused.stderr, /--candidate-hold must be an integer ≥ 0/);
  }
});

Deno.test("sim:grid refuses an engine step cost that is not a number of milliseconds ≥ 0", async () => {
  for (const bad of ["-1", "lots", ""]) {
    const refused = await run([`--engine-step-ms=${bad}`]);
    assertEquals(refused.code, 2, bad);
    assertMatch(refused.stderr, /--engine-step-ms must be a number ≥ 0/);
  }
});

Deno.test("sim:grid --engine-step-ms reaches the cells: every floor rises", async () => {
  const tiny = ["--quick", "--seeds", "3", "--requests", "40", "--pool", "off"];
  const floors = (stdout: string) =>
    stdout.split("\n").filter((line) => line.startsWith("| docs")).map((line) =>
      Number(line.split("|")[2])
    );
  const free = await run(tiny);
  const stepped = await run([...tiny, "--engine-step-ms", "200"]);
  assertEquals([free.code, stepped.code], [0, 0]);
  const [before, after] = [floors(free.stdout), floors(stepped.stdout)];
  assertEquals(before.length, 4);
  assertEquals(after.length, 4);
  after.forEach((floor, i) => assert(floor > before[i], `cell ${i}: ${floor} vs ${before[i]}`));
});

Deno.test("sim:grid --pool always runs the cells with every engine loading the pool, and refuses other modes", async () => {
  const tiny = ["--quick", "--seeds", "3", "--requests", "40"];
  const always = await run([...tiny, "--pool", "always"]);
  assertEquals(always.code, 0);
  const rows = always.stdout.split("\n").filter((line) => line.startsWith("| docs"));
  assertEquals(rows.length, 4);
  assert(rows.every((row) => row.includes("pool always")), rows.join("\n"));
  const refused = await run([...tiny, "--pool", "sometimes"]);
  assertEquals(refused.code, 2);
  assertMatch(refused.stderr, /--pool must be off, planned or always/);
});

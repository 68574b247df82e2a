import { assertEquals, assertMatch } from "../assert.ts";
import { runSimGrid } from "../../cli/sim_grid.ts";

/** runSimGrid's exit code and what it printed to stderr. */
async function run(args: string[]): Promise<{ code: number; stderr: string }> {
  const printed: string[] = [];
  const original = console.error;
  console.error = (...parts: unknown[]) => printed.push(parts.join(" "));
  try {
    return { code: await runSimGrid(args), stderr: printed.join("\n") };
  } finally {
    console.error = original;
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

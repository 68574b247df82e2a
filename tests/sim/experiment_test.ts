import { assert, assertEquals } from "../assert.ts";
import { stickyArm } from "../../src/experiment/assign.ts";
import { runSimCli } from "../../cli/sim.ts";
import { parseExperimentFile, splitTrace } from "../../src/sim/experiment.ts";
import { parseMooncakeTrace } from "../../src/sim/trace.ts";
import { quietly } from "./quietly.ts";

const TRACE = new URL("../data/conversation_trace.jsonl", import.meta.url).pathname;
const EXPERIMENT = {
  experiment: {
    key: "header:x-session-id",
    arms: [
      { name: "A", policy: "cache_aware", weight: 1 },
      { name: "B", policy: "least_load", weight: 1 },
    ],
  },
};

Deno.test("splitTrace() keys requests by their opening, like the gateway's prefix key", async () => {
  const trace = parseMooncakeTrace(await Deno.readTextFile(TRACE), { limit: 2000 });
  const experiment = parseExperimentFile(JSON.stringify(EXPERIMENT), "ab.json");
  const split = splitTrace(trace, experiment, { blockTokens: 512, seed: 1 });
  assert(split.note?.includes('no "x-session-id" header'), split.note);
  const armOfOpening = new Map<number, number>();
  trace.forEach((request, i) => {
    // prefixTokens 1024 = two 512-token blocks: the second block id names the opening.
    assertEquals(split.of[i], stickyArm(experiment.arms, `block:${request.hashIds[1]}`, ""));
    const seen = armOfOpening.get(request.hashIds[1]);
    if (seen !== undefined) assertEquals(split.of[i], seen);
    armOfOpening.set(request.hashIds[1], split.of[i]);
  });
  const b = split.of.reduce((sum, arm) => sum + arm, 0);
  assert(b > 800 && b < 1200, `${b} of 2000 requests in arm B`);
  // The literal first block is the shared system prompt: keying on it splits nothing.
  const firstBlock = splitTrace(trace, { ...experiment, prefixTokens: 512 }, {
    blockTokens: 512,
    seed: 1,
  });
  assertEquals(new Set(firstBlock.of).size, 1);
});

Deno.test("deno task sim --experiment prints the per-arm report and verdict, and writes it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/ab.json`;
    await Deno.writeTextFile(file, JSON.stringify(EXPERIMENT));
    const { value: code, out } = await quietly(() =>
      runSimCli([
        "--trace",
        TRACE,
        "--limit",
        "400",
        "--instances",
        "4",
        "--experiment",
        file,
        "--out",
        dir,
      ])
    );
    assertEquals(code, 0);
    assert(out.includes("Verdict:\n  arm B"), out);
    const written = JSON.parse(await Deno.readTextFile(`${dir}/experiment.json`));
    const arms = written.report.arms;
    assertEquals(arms.map((a: { name: string }) => a.name), ["A", "B"]);
    assertEquals(arms[0].requests + arms[1].requests, 400);
    assertEquals(written.report.verdict.length, 1);
    assert(typeof written.report.comparisons[0].mannWhitney.p === "number");
    // --experiment alone runs no policy comparison.
    assertEquals(await exists(`${dir}/results.json`), false);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deno task sim --experiment rejects an arm with an unknown policy", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/bad.json`;
    await Deno.writeTextFile(
      file,
      JSON.stringify({
        arms: [{ name: "A", policy: "cache_aware" }, { name: "B", policy: "fast" }],
      }),
    );
    const { value: code, errors } = await quietly(() =>
      runSimCli(["--trace", TRACE, "--experiment", file, "--out", dir])
    );
    assertEquals(code, 2);
    assert(errors.includes('arms[1].policy: Unknown scheduling policy "fast"'), errors);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

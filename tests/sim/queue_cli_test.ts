import { assert, assertEquals } from "../assert.ts";
import { runSimCli } from "../../cli/sim.ts";
import { assignBands, leavingOut, parseBandShares } from "../../src/sim/sim_bands.ts";
import { quietly } from "./quietly.ts";

const TRACE = new URL("../data/conversation_trace.jsonl", import.meta.url).pathname;

Deno.test("bands: seeded, the same for a seed, in the given shares", () => {
  const spec = { shares: [0.2, 0.8], tenants: 4 };
  const a = assignBands(5_000, spec, 3);
  assertEquals(Array.from(a.band), Array.from(assignBands(5_000, spec, 3).band));
  const share0 = a.band.filter((b) => b === 0).length / 5_000;
  assert(share0 > 0.18 && share0 < 0.22, `band 0 share ${share0}`);
  assert(a.tenant.every((t) => t >= 0 && t < 4));
  assertEquals(new Set(a.tenant).size, 4);
  assertEquals(Array.from(assignBands(3, { ...spec, priorities: [2, 0, 1] }, 1).band), [2, 0, 1]);
});

Deno.test("bands: --bands takes positive shares only", () => {
  assertEquals(parseBandShares("0.1,0.3,0.6"), [0.1, 0.3, 0.6]);
  for (const bad of ["0,1", "a", "0.5,-1", ""]) {
    let threw = false;
    try {
      parseBandShares(bad);
    } catch {
      threw = true;
    }
    assert(threw, bad);
  }
});

Deno.test("runSimCli() with --admission queue writes queue.md and queue.json for every run", async () => {
  const out = await Deno.makeTempDir();
  try {
    const { value: code, out: printed } = await quietly(() =>
      runSimCli([
        "--trace",
        TRACE,
        "--limit",
        "300",
        "--instances",
        "2",
        "--speed",
        "3",
        "--slo-ttft",
        "10",
        "--queue-ttl",
        "5",
        "--bands",
        "0.5,0.5",
        "--policies",
        "mooncake_ttft:ttft,mooncake_ttft",
        "--admission",
        "queue",
        "--out",
        out,
      ])
    );
    assertEquals(code, 0);
    assert(printed.includes("goodput"), printed);
    const queue = JSON.parse(await Deno.readTextFile(`${out}/queue.json`));
    assertEquals(Object.keys(queue.runs), ["mooncake_ttft:ttft", "mooncake_ttft"]);
    const queued = queue.runs["mooncake_ttft"];
    assertEquals(queued.bands.map((b: { band: number }) => b.band), [0, 1]);
    assert(queued.maxWaitS <= 5);
    assertEquals(queue.runs["mooncake_ttft:ttft"].queued, 0);
    const markdown = await Deno.readTextFile(`${out}/queue.md`);
    assert(markdown.includes("| mooncake_ttft | 1 |"), markdown);
    const results = JSON.parse(await Deno.readTextFile(`${out}/results.json`));
    assertEquals(results.settings["queue TTL (s)"], 5);
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

Deno.test("runSimCli() refuses a bad admission, TTL or band split", async () => {
  const { value: code, errors } = await quietly(() =>
    runSimCli(["--trace", TRACE, "--admission", "wait", "--queue-ttl", "0", "--bands", "0,1"])
  );
  assertEquals(code, 2);
  assert(errors.includes("--admission must be off, ttft, load or queue"), errors);
  assert(errors.includes("--queue-ttl must be a positive number"), errors);
  assert(errors.includes("--bands must be positive shares"), errors);
});

Deno.test("runSimCli() --drop leaves one request out, and refuses an index past the trace", async () => {
  const out = await Deno.makeTempDir();
  try {
    const args = [
      "--trace",
      TRACE,
      "--limit",
      "50",
      "--instances",
      "2",
      "--policies",
      "mooncake_ttft:queue",
    ];
    const { value: code } = await quietly(() => runSimCli([...args, "--drop", "7", "--out", out]));
    assertEquals(code, 0);
    const queue = JSON.parse(await Deno.readTextFile(`${out}/queue.json`));
    assertEquals(queue.runs["mooncake_ttft:queue"].requests, 49);
    const past = await quietly(() => runSimCli([...args, "--drop", "50", "--out", out]));
    assertEquals(past.value, 2);
    assert(past.errors.includes("--drop 50: the trace has 50 requests"), past.errors);
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

Deno.test("leavingOut: every other request keeps the band and tenant it had", () => {
  const spec = { shares: [0.3, 0.7], tenants: 3 };
  const all = assignBands(40, spec, 5);
  const left = assignBands(39, leavingOut(spec, 40, 5, 11), 5);
  const others = (values: Int32Array) => Array.from(values).filter((_, i) => i !== 11);
  assertEquals(Array.from(left.band), others(all.band));
  assertEquals(Array.from(left.tenant), others(all.tenant));
  assert(
    Array.from(assignBands(39, spec, 5).tenant).some((t, i) => t !== left.tenant[i]),
    "drawn afresh, later requests would take other tenants",
  );
});

Deno.test("runSimCli() refuses a bad --queue-admit, and --drop with --experiment", async () => {
  const { value: code, errors } = await quietly(() =>
    runSimCli(["--trace", TRACE, "--queue-admit", "never", "--drop", "1", "--experiment", "x.json"])
  );
  assertEquals(code, 2);
  assert(errors.includes("--queue-admit must be fits, idle, cause"), errors);
  assert(errors.includes("--drop does not combine with --experiment"), errors);
});

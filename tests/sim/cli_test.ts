import { assert, assertEquals } from "../assert.ts";
import { runSimCli } from "../../cli/sim.ts";
import { quietly } from "./quietly.ts";

const TRACE = new URL("../data/conversation_trace.jsonl", import.meta.url).pathname;

Deno.test("runSimCli() writes results.json, the Markdown table and both SVG charts", async () => {
  const out = await Deno.makeTempDir();
  try {
    const { value: code } = await quietly(() =>
      runSimCli([
        "--trace",
        TRACE,
        "--limit",
        "150",
        "--instances",
        "4",
        "--policies",
        "random,mooncake_ttft:ttft",
        "--engine-step-ms",
        "20",
        "--out",
        out,
      ])
    );
    assertEquals(code, 0);
    const results = JSON.parse(await Deno.readTextFile(`${out}/results.json`));
    assertEquals(Object.keys(results.policies), ["random", "mooncake_ttft:ttft"]);
    assertEquals(results.settings["engine step (ms)"], 20);
    for (
      const key of [
        "meanTtftS",
        "p50TtftS",
        "p90TtftS",
        "p99TtftS",
        "sloAttainment",
        "rejected",
        "hitRatio",
        "prefillTokens",
      ]
    ) {
      assertEquals(typeof results.policies.random[key], "number", key);
    }
    const table = await Deno.readTextFile(`${out}/results.md`);
    assert(table.includes("| mooncake_ttft:ttft |"), table);
    for (const chart of ["ttft_cdf.svg", "instance_load.svg"]) {
      const svg = await Deno.readTextFile(`${out}/${chart}`);
      assert(svg.startsWith("<svg") && svg.trimEnd().endsWith("</svg>"), chart);
    }
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

Deno.test("runSimCli() lists every bad option and exits 2", async () => {
  const { value: code, errors } = await quietly(() =>
    runSimCli([
      "--trace",
      TRACE,
      "--policies",
      "random,fastest",
      "--speed",
      "-1",
      "--frobnicate",
      "1",
      "--engine-step-ms",
      "-5",
    ])
  );
  assertEquals(code, 2);
  for (
    const part of [
      'unknown policy "fastest"',
      "--speed must be",
      "unknown option --frobnicate",
      "--engine-step-ms must be a non-negative number",
    ]
  ) {
    assert(errors.includes(part), `${part} missing from: ${errors}`);
  }
});

Deno.test("runSimCli() says which trace it cannot read", async () => {
  const { value: code, errors } = await quietly(() =>
    runSimCli(["--trace", "/nonexistent/trace.jsonl"])
  );
  assertEquals(code, 1);
  assert(errors.includes("/nonexistent/trace.jsonl"), errors);
});

Deno.test("sim --workload replays a generated workload; --trace and --workload together are refused", async () => {
  const out = await Deno.makeTempDir();
  try {
    const args = ["--instances", "4", "--policies", "kv_hit_len", "--out", out];
    const workload = "docs:requests=200,documents=20,documentTokens=4096";
    const { value: code } = await quietly(() => runSimCli(["--workload", workload, ...args]));
    assertEquals(code, 0);
    const results = JSON.parse(await Deno.readTextFile(`${out}/results.json`));
    assert(results.policies.kv_hit_len.hitRatio > 0.5, `${results.policies.kv_hit_len.hitRatio}`);
    const markdown = await Deno.readTextFile(`${out}/results.md`);
    assert(markdown.includes(`workload ${workload} (200 requests`), markdown);
    const { value: both, errors } = await quietly(() =>
      runSimCli(["--workload", workload, "--trace", TRACE, ...args])
    );
    assertEquals(both, 2);
    assert(errors.includes("give one of --trace FILE and --workload SPEC"), errors);
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

import { assert, assertEquals } from "../assert.ts";
import { runSimCli } from "../../cli/sim.ts";
import { quietly } from "./quietly.ts";

const TRACE = new URL("../data/conversation_trace.jsonl", import.meta.url).pathname;

/**
 * Runs the CLI in P/D mode on the trace's first 300 requests (2P+2D at speed 3) with `flags`,
 * expects success, and hands `check` the output folder (removed afterwards).
 */
async function withPdRun(flags: string[], check: (out: string) => Promise<void>): Promise<void> {
  const out = await Deno.makeTempDir();
  try {
    const common = ["--trace", TRACE, "--limit", "300", "--prefill", "2", "--decode", "2"];
    const { value: code, out: printed } = await quietly(() =>
      runSimCli([...common, "--speed", "3", ...flags, "--out", out])
    );
    assertEquals(code, 0, printed);
    await check(out);
  } finally {
    await Deno.remove(out, { recursive: true });
  }
}

Deno.test("runSimCli() in P/D mode runs every cluster × policy × mode and writes the tables and charts", async () => {
  const flags = [
    "--neutral",
    "4",
    "--neutral-chunk",
    "off,2048",
    "--policies",
    "mooncake_ttft,dynamo_kv",
  ];
  await withPdRun(
    [...flags, "--early-rejection", "baseline,predicted", "--tbt-slo", "0.05"],
    async (out) => {
      const results = JSON.parse(await Deno.readTextFile(`${out}/results.json`));
      assertEquals(Object.keys(results.runs), [
        "2P+2D mooncake_ttft baseline",
        "2P+2D mooncake_ttft predicted",
        "2P+2D dynamo_kv baseline",
        "2P+2D dynamo_kv predicted",
        // Neutral clusters run the modes that apply to them (baseline: TTFT only).
        "4N-whole mooncake_ttft baseline",
        "4N-whole dynamo_kv baseline",
        "4N-chunk2048 mooncake_ttft baseline",
        "4N-chunk2048 dynamo_kv baseline",
      ]);
      const run = results.runs["2P+2D mooncake_ttft predicted"];
      for (const key of ["meanTtftS", "p99TtftS", "rejected", "hitRatio", "tbtP99S"]) {
        assertEquals(typeof run[key], "number", key);
      }
      assertEquals(run.rejectedAfterPrefill, 0);
      assertEquals(results.settings["TBT SLO (s)"], 0.05);
      const table = await Deno.readTextFile(`${out}/results.md`);
      for (const part of ["## TTFT", "## Rejections and pool load", "## Time between tokens"]) {
        assert(table.includes(part), part);
      }
      for (const chart of ["ttft_cdf.svg", "tbt_cdf.svg", "instance_load.svg", "pool_load.svg"]) {
        const svg = await Deno.readTextFile(`${out}/${chart}`);
        assert(svg.startsWith("<svg") && svg.trimEnd().endsWith("</svg>"), chart);
      }
    },
  );
});

Deno.test("runSimCli() lists every bad P/D option and exits 2", async () => {
  const { value: code, errors } = await quietly(() =>
    runSimCli([
      "--trace",
      TRACE,
      "--prefill",
      "4",
      "--neutral",
      "0",
      "--neutral-chunk",
      "sometimes",
      "--early-rejection",
      "late",
      "--policies",
      "mooncake_ttft:ttft",
      "--decode-model",
      "1",
      "--decode-load",
      "cluster",
      "--local-prefill-chunk",
      "64",
      "--decode-kv",
      "exact",
    ])
  );
  assertEquals(code, 2);
  for (
    const part of [
      "--prefill and --decode go together",
      "--neutral must be",
      '--neutral-chunk: "sometimes"',
      '--early-rejection: "late"',
      'unknown policy "mooncake_ttft:ttft" in P/D mode',
      "--decode-model must be",
      '--decode-load: "cluster" is not one of instance, pool',
      "--local-prefill-chunk needs --local-prefill",
      '--decode-kv: "exact" is not one of guess, prompt, reported',
    ]
  ) {
    assert(errors.includes(part), `${part} missing from: ${errors}`);
  }
});

Deno.test("runSimCli() runs early, predicted and committed once per --decode-load scope, named in the label", async () => {
  const flags = [
    "--policies",
    "mooncake_ttft",
    "--early-rejection",
    "baseline,early,predicted,committed",
  ];
  await withPdRun([...flags, "--decode-load", "instance,pool"], async (out) => {
    const results = JSON.parse(await Deno.readTextFile(`${out}/results.json`));
    assertEquals(Object.keys(results.runs), [
      "2P+2D mooncake_ttft baseline",
      "2P+2D mooncake_ttft early (instance)",
      "2P+2D mooncake_ttft early (pool)",
      "2P+2D mooncake_ttft predicted (instance)",
      "2P+2D mooncake_ttft predicted (pool)",
      "2P+2D mooncake_ttft committed (instance)",
      "2P+2D mooncake_ttft committed (pool)",
    ]);
    assertEquals(results.runs["2P+2D mooncake_ttft committed (pool)"].decodeLoad, "pool");
    assertEquals(results.runs["2P+2D mooncake_ttft early (pool)"].decodeLoad, "pool");
    assertEquals(results.runs["2P+2D mooncake_ttft predicted (instance)"].decodeLoad, "instance");
    assertEquals(results.runs["2P+2D mooncake_ttft baseline"].decodeLoad, undefined);
  });
});

Deno.test("runSimCli() --local-prefill runs each mode on P/D clusters and reports conditional disaggregation", async () => {
  const flags = ["--policies", "mooncake_ttft", "--early-rejection", "baseline"];
  await withPdRun(
    [...flags, "--local-prefill", "off,threshold", "--local-prefill-tokens", "2048"],
    async (out) => {
      const results = JSON.parse(await Deno.readTextFile(`${out}/results.json`));
      assertEquals(Object.keys(results.runs), [
        "2P+2D mooncake_ttft baseline local-off",
        "2P+2D mooncake_ttft baseline local-threshold",
      ]);
      const local = results.runs["2P+2D mooncake_ttft baseline local-threshold"].localPrefill;
      assertEquals(local.mode, "threshold");
      assertEquals(local.maxTokens, 2048);
      assert(local.localPrefills > 0, JSON.stringify(local));
      const table = await Deno.readTextFile(`${out}/results.md`);
      assert(table.includes("## Conditional disaggregation"), table);
    },
  );
});

Deno.test("runSimCli() --decode-kv runs each view on P/D clusters, named in the label and recorded", async () => {
  const flags = ["--policies", "mooncake_ttft", "--early-rejection", "early"];
  await withPdRun([...flags, "--decode-kv", "guess,reported"], async (out) => {
    const results = JSON.parse(await Deno.readTextFile(`${out}/results.json`));
    assertEquals(Object.keys(results.runs), [
      "2P+2D mooncake_ttft early kv-guess",
      "2P+2D mooncake_ttft early kv-reported",
    ]);
    assertEquals(results.runs["2P+2D mooncake_ttft early kv-reported"].decodeKv, "reported");
    assertEquals(results.runs["2P+2D mooncake_ttft early kv-guess"].decodeKv, "guess");
  });
});

Deno.test("runSimCli() --pd-queue runs without and with the flow-control queue, named in the label", async () => {
  const flags = ["--policies", "mooncake_ttft", "--early-rejection", "early"];
  await withPdRun([...flags, "--pd-queue", "off,on"], async (out) => {
    const results = JSON.parse(await Deno.readTextFile(`${out}/results.json`));
    assertEquals(Object.keys(results.runs), [
      "2P+2D mooncake_ttft early",
      "2P+2D mooncake_ttft early queue",
    ]);
    assertEquals(results.runs["2P+2D mooncake_ttft early"].queue, undefined);
    const queue = results.runs["2P+2D mooncake_ttft early queue"].queue;
    assert(queue.waited > 0 && queue.waited >= queue.servedAfterWait, JSON.stringify(queue));
    assert(
      Object.keys(results.settings).some((key) => key.startsWith("flow-control queue")),
      JSON.stringify(results.settings),
    );
  });
  const { value: code, errors } = await quietly(() =>
    runSimCli([
      "--trace",
      TRACE,
      "--prefill",
      "2",
      "--decode",
      "2",
      "--pd-queue",
      "on,maybe",
      "--local-prefill",
      "threshold",
    ])
  );
  assertEquals(code, 2);
  assert(errors.includes('--pd-queue: "maybe" is not one of off, on'), errors);
  assert(errors.includes("--pd-queue on is not modelled with --local-prefill"), errors);
});

Deno.test("runSimCli() --queue-* options reach the P/D runs' queue, and the settings say which", async () => {
  const flags = ["--policies", "mooncake_ttft", "--early-rejection", "early", "--pd-queue", "on"];
  const waitedWith = async (extra: string[]) => {
    let waited = 0;
    await withPdRun([...flags, ...extra], async (out) => {
      const results = JSON.parse(await Deno.readTextFile(`${out}/results.json`));
      waited = results.runs["2P+2D mooncake_ttft early queue"].queue.waited;
      if (extra.length) {
        assertEquals(
          results.settings["flow-control queue (TTL s, max requests, admit when)"],
          "30, 1, cause",
        );
      }
    });
    return waited;
  };
  const [defaults, oneAtATime] = [
    await waitedWith([]),
    await waitedWith(["--queue-max-requests", "1"]),
  ];
  assert(defaults > 0, "requests wait with the router's defaults");
  assert(oneAtATime < defaults, `a queue of one holds fewer: ${oneAtATime} against ${defaults}`);
});

Deno.test("runSimCli() refuses an engine step cost in P/D mode, whose engines have none", async () => {
  const { value: code, errors } = await quietly(() =>
    runSimCli(["--trace", TRACE, "--prefill", "2", "--decode", "2", "--engine-step-ms", "30"])
  );
  assertEquals(code, 2);
  assert(errors.includes("--engine-step-ms does not combine with P/D mode"), errors);
});

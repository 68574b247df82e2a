import { assert, assertEquals } from "../assert.ts";
import { withoutFirst } from "../../src/sim/trace.ts";
import { runSimCli } from "../../cli/sim.ts";
import { quietly } from "./quietly.ts";

const TRACE = new URL("../data/conversation_trace.jsonl", import.meta.url).pathname;

Deno.test("withoutFirst() leaves out the first requests and the rest arrive from 0, spaced as before", () => {
  const request = (timestampMs: number) => ({
    timestampMs,
    inputLength: 10,
    outputLength: 1,
    hashIds: [timestampMs],
  });
  const trace = [request(0), request(40), request(100), request(130)];
  const rest = withoutFirst(trace, 2);
  assertEquals(rest.map((r) => r.timestampMs), [0, 30]);
  assertEquals(rest.map((r) => r.hashIds), [[100], [130]]);
  assertEquals(withoutFirst(trace, 0), trace);
  assertEquals(withoutFirst(trace, 9), []);
});

Deno.test("sim --skip replays the trace after its first requests (--limit counts after it); a bad --skip is refused", async () => {
  const out = await Deno.makeTempDir();
  try {
    const flags = ["--trace", TRACE, "--instances", "2", "--policies", "least_load", "--out", out];
    const { value: code } = await quietly(() =>
      runSimCli([...flags, "--skip", "100", "--limit", "40"])
    );
    assertEquals(code, 0);
    const results = JSON.parse(await Deno.readTextFile(`${out}/results.json`));
    assertEquals(results.policies.least_load.requests, 40);
    const refused = await quietly(() => runSimCli([...flags, "--skip", "-1"]));
    assertEquals(refused.value, 2);
    assert(refused.errors.includes("--skip"), refused.errors);
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

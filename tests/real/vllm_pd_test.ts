/**
 * P/D against the real protocol code: a real vLLM prefill and decode pair (MooncakeConnector over
 * TCP on the CPU build) behind tidegate with `disaggregation.protocol: vllm-mooncake`. Every chat
 * is served by the pair, the decode reports the transferred prompt as cached, and the answer is
 * the one the prefill engine gives alone. It runs in a loopback-only network namespace (root; the
 * connector listens on every interface whatever it is told): tests/real/pd_driver.ts.
 */
import { assert, assertEquals } from "../assert.ts";
import { requireRealPrograms } from "./real_env.ts";

async function run(command: string, ...args: string[]): Promise<string> {
  const output = await new Deno.Command(command, { args, stdout: "piped", stderr: "piped" })
    .output();
  const text = new TextDecoder().decode(output.stdout);
  if (!output.success) {
    throw new Error(`${command} ${args.join(" ")}: ${new TextDecoder().decode(output.stderr)}`);
  }
  return text;
}

Deno.test("real vLLM P/D: a MooncakeConnector prefill and decode pair behind tidegate serves every chat as the prefill engine alone would", async () => {
  requireRealPrograms();
  if (Deno.uid() !== 0) throw new Error("this test makes a network namespace: run it as root");
  const ns = `tidegate-pd-${Deno.pid}`;
  await run("ip", "netns", "add", ns);
  try {
    await run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up");
    const driver = new URL("./pd_driver.ts", import.meta.url).pathname;
    const stdout = await run("ip", "netns", "exec", ns, Deno.execPath(), "run", "-A", driver);
    const line = stdout.trim().split("\n").at(-1)!;
    const outcome = JSON.parse(line);
    assert(outcome.ok, outcome.error);
    const results = outcome.results as Record<string, unknown>[];
    console.log(JSON.stringify(results.map(({ content: _, ...r }) => r)));
    assertEquals(results.length, 6);
    for (const r of results) {
      assertEquals(
        [r.status, r.done, r.prefill, r.decode],
        [200, true, "p0", "d0"],
        JSON.stringify(r),
      );
      assert((r.cachedTokens as number) >= (r.promptTokens as number) - 128, JSON.stringify(r));
      assert(r.sameAsAlone, JSON.stringify(r));
    }
    // The decode engine's own page gives its cache's size (docs/disaggregation.md, "Admission").
    const { kvCapacityTokens } = outcome.decodeLoad;
    assert(kvCapacityTokens > 0 && Number.isInteger(kvCapacityTokens), JSON.stringify(outcome));
  } finally {
    await run("ip", "netns", "delete", ns).catch(() => "");
  }
});

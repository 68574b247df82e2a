/** `start` writes JSON lines only, also when a library prints (the node:http adapter does). */
import { assertEquals, assertRejects } from "../assert.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { waitFor } from "../support/eventually.ts";
import { startRouterProcess, writeRouterConfig } from "../support/router_process.ts";

Deno.test("an answer the engine cuts short leaves the router's output all JSON lines", async () => {
  const engine = startFakeEngine({ id: "e0", model: "m", timeScale: 0.001 });
  const config = await writeRouterConfig({
    models: [{
      name: "m",
      tokenizer: { mode: "none" },
      kv: { store: "none" },
      instances: [{ id: "e0", url: engine.url }],
    }],
  });
  const router = await startRouterProcess(config.path);
  try {
    await engine.setFailure("midstream");
    const response = await fetch(`${router.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", prompt: [1, 2, 3], max_tokens: 8 }),
    });
    assertEquals(response.status, 200);
    await assertRejects(() => response.text());
    // The adapter's report of the write it could not finish, as one JSON line.
    const reported = await waitFor(
      () => router.log.map(parse).find((entry) => entry?.source === "console"),
      10_000,
      () =>
        `the adapter's console output in the JSON log; the router wrote:\n${
          [...router.log, ...router.out].join("\n")
        }`,
    );
    assertEquals(reported.level, "error");
    const plain = [...router.log, ...router.out].filter((line) => parse(line) === undefined);
    assertEquals(plain, [], "lines that are not JSON objects");
  } finally {
    await router.stop();
    await engine.close();
    await config.remove();
  }
});

function parse(line: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(line);
    return typeof value === "object" && value !== null ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Failures an operator must see: one log line each, naming the URL and the error. */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import { completion, range, startTestCluster } from "../support/harness.ts";
import { waitFor } from "../support/eventually.ts";

const PROMPT = range(1000, 200);

Deno.test("a breaker opening logs the instance's URL and the last error", async () => {
  const t = await startTestCluster({ engines: 2 });
  try {
    // e0 ranks first and answers 500; e1 then serves, which makes the 500s e0's fault.
    await t.engines[0].setFailure("http500");
    for (let i = 0; i < 3; i++) {
      const prompt = range(1000 * (i + 1), 200);
      t.hold(0, prompt, 12);
      await (await completion(t.url, { prompt })).text();
    }
    const opened = t.logs.filter((l) =>
      l.message === "instance breaker changed" && l.fields?.to === "open"
    );
    assert(opened.length >= 1, JSON.stringify(t.logs.map((l) => l.message)));
    const line = opened[0].fields!;
    const engine = t.engines.find((e) => e.id === line.instance)!;
    assertEquals(line.url, engine.url);
    assertMatch(
      String(line.reason),
      new RegExp(
        `consecutive failures \\(last: request http_5xx: ${
          engine.url.replaceAll(".", "\\.")
        }: HTTP 500`,
      ),
    );
  } finally {
    await t.close();
  }
});

Deno.test("the store going down and coming back is logged once each, with its URL and error", async () => {
  const t = await startTestCluster({ kv: { timeoutMs: 200, downWindowMs: 0 } });
  try {
    await t.master.setMode("http500");
    await (await completion(t.url, { prompt: PROMPT })).text();
    const down = t.logs.filter((l) => l.message.startsWith("KV store down"));
    assertEquals(down.length, 1);
    assertEquals(down[0].fields?.url, t.master.url);
    assertMatch(String(down[0].fields?.error), /500/);
    await t.master.setMode("ok"); // with no down-window the next lookup is the probe
    await (await completion(t.url, { prompt: range(5000, 200) })).text();
    assertEquals(t.logs.filter((l) => l.message === "KV store answering again").length, 1);
  } finally {
    await t.close();
  }
});

Deno.test("an engine failing mid-stream logs one line with its URL and the error", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    await t.engines[0].setFailure("midstream");
    const response = await completion(t.url, { prompt: PROMPT, max_tokens: 8, stream: true });
    assertEquals(response.status, 200);
    await response.text(); // the stream ends with an error event
    const lines = await waitFor(
      () => {
        const found = t.logs.filter((l) => l.message === "engine failed mid-stream");
        return found.length ? found : undefined;
      },
      5_000,
      "the mid-stream failure line",
    );
    assertEquals(lines.length, 1);
    const line = lines[0].fields!;
    assertEquals(line.level, "warn");
    assertEquals(line.instance, "e0");
    assertEquals(line.url, t.engines[0].url);
    assert(String(line.error).length > 0);
    assertEquals(typeof line.requestId, "string");
  } finally {
    await t.close();
  }
});

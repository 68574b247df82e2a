/** The access log: one line per request with what an operator needs, and nothing private. */
import { assert, assertEquals } from "../assert.ts";
import { CHUNK, completion, MODEL, range, startTestCluster } from "../support/harness.ts";
import { waitFor } from "../support/eventually.ts";

const SECRET = "sk-tidegate-test-secret-4711";
const PROMPT_TEXT = "the-confidential-prompt-marker tells the engine everything";

function accessLines(logs: { message: string; fields?: Record<string, unknown> }[]) {
  return logs.filter((l) => l.message === "request").map((l) => l.fields!);
}

Deno.test("a request's access line names the request, model, arm, instance, hit and timings", async () => {
  const t = await startTestCluster({ engines: 2 });
  try {
    const prompt = range(1000, 12 * CHUNK);
    t.hold(1, prompt, 8);
    const response = await completion(t.url, { prompt, stream: true });
    await response.text();
    const [line] = await waitFor(
      () => {
        const lines = accessLines(t.logs);
        return lines.length ? lines : undefined;
      },
      5_000,
      "the access line",
    );
    assertEquals(line.level, "info");
    assertEquals(line.requestId, response.headers.get("x-request-id"));
    assertEquals(line.model, MODEL);
    assertEquals(line.arm, "default");
    assertEquals(response.headers.get("x-tidegate-arm"), "default");
    assertEquals(line.instance, "e1");
    assertEquals(line.promptTokens, prompt.length);
    assertEquals(line.predictedHitTokens, 8 * CHUNK);
    assertEquals(line.status, 200);
    assertEquals(line.outcome, "ok");
    assertEquals(typeof line.ttftMs, "number");
    assert((line.durationMs as number) >= (line.ttftMs as number));
  } finally {
    await t.close();
  }
});

Deno.test("the access line never carries the prompt text or the Authorization value", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const headers = { authorization: `Bearer ${SECRET}`, "x-api-key": SECRET };
    await (await completion(t.url, { prompt: PROMPT_TEXT }, headers)).text();
    const chat = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({
        model: MODEL,
        max_tokens: 4,
        messages: [{ role: "user", content: PROMPT_TEXT }],
      }),
    });
    await chat.text();
    const lines = await waitFor(
      () => {
        const found = accessLines(t.logs);
        return found.length === 2 ? found : undefined;
      },
      5_000,
      "two access lines",
    );
    for (const line of lines) {
      const text = JSON.stringify(line);
      assert(!text.includes("confidential-prompt-marker"), text);
      assert(!text.includes(SECRET), text);
      assertEquals(line.status, 200);
    }
  } finally {
    await t.close();
  }
});

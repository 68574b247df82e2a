/**
 * The router asks every streaming engine for its usage (to read the reused tokens) and keeps that
 * usage chunk from a client that did not ask for it.
 */
import { assert, assertEquals } from "../assert.ts";
import { completion, MODEL, range, startTestCluster } from "../support/harness.ts";

/** The SSE data events of a streamed answer, `[DONE]` left out. */
function events(text: string): Record<string, unknown>[] {
  return text.split("\n").filter((line) => line.startsWith("data: ") && line !== "data: [DONE]")
    .map((line) => JSON.parse(line.slice(6)));
}

const usageEvents = (text: string) => events(text).filter((e) => "usage" in e);

Deno.test("a stream that did not ask for usage gets none, though the engine was asked for it", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const response = await completion(t.url, { prompt: range(1, 40), stream: true });
    const text = await response.text();
    assertEquals(response.status, 200, text);
    assert(events(text).length > 0, text);
    assertEquals(usageEvents(text), []);
    assert(text.endsWith("data: [DONE]\n\n"), text);
    const seen = t.engines[0].stats.requests[0];
    assertEquals(seen.body?.stream_options, { include_usage: true });
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assert(
      metrics.includes(`tidegate_engine_reported_prompt_tokens_total{model="${MODEL}"`),
      "the router read the usage it asked for",
    );
  } finally {
    await t.close();
  }
});

Deno.test("a stream that asked for usage gets exactly one usage chunk", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const response = await completion(t.url, {
      prompt: range(1, 40),
      stream: true,
      stream_options: { include_usage: true },
    });
    const text = await response.text();
    const usage = usageEvents(text).filter((e) => e.usage !== null);
    assertEquals(usage.length, 1, text);
    assertEquals((usage[0].usage as { prompt_tokens: number }).prompt_tokens, 40);
  } finally {
    await t.close();
  }
});

Deno.test("with kv.requestStreamUsage false the request goes as the client sent it", async () => {
  const t = await startTestCluster({ engines: 1, kv: { requestStreamUsage: false } });
  try {
    const response = await completion(t.url, { prompt: range(1, 40), stream: true });
    const text = await response.text();
    assertEquals(usageEvents(text), []);
    assertEquals(t.engines[0].stats.requests[0].body?.stream_options, undefined);
  } finally {
    await t.close();
  }
});

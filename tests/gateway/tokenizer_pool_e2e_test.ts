import { assertEquals } from "../assert.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import type { ChatMessage } from "../../src/tokenize/types.ts";
import { MODEL, startTestCluster, type TestCluster } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";

/** Sum of a /metrics series' samples whose labels contain every `label="value"` given. */
async function metric(cluster: TestCluster, name: string, ...labels: string[]): Promise<number> {
  const text = await (await fetch(`${cluster.url}/metrics`)).text();
  return text.split("\n")
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .filter((line) => labels.every((label) => line.includes(label)))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(" ") + 1)), 0);
}

/** A new ~4k-token conversation: nothing in it was seen before. */
function newConversation(n: number): Record<string, unknown> {
  const words = Array.from({ length: 3_000 }, (_, i) => `w${(i * 7919 + n * 104_729) % 50_021}`);
  return {
    model: MODEL,
    max_tokens: 2,
    messages: [
      { role: "system", content: `Conversation ${n}. Answer briefly.` },
      { role: "user", content: words.join(" ") },
    ],
  };
}

function chat(cluster: TestCluster, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${cluster.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

Deno.test("long prompts are tokenized by the workers, with the ids the main loop would compute", async () => {
  const local = await loadTokenizer("builtin:qwen3");
  const cluster = await startTestCluster({
    model: { tokenizer: { path: "builtin:qwen3" } },
    kv: { timeoutMs: 1_000, minPromptTokens: 1024, chunkSize: 256 },
    top: { workers: 2 },
  });
  try {
    // The workers start with the model (loading takes seconds), before any prompt needs them.
    assertEquals(await metric(cluster, "tidegate_tokenizer_workers"), 2);
    await eventually(
      async () => await metric(cluster, "tidegate_tokenizer_workers_ready") >= 2,
      60_000,
      "both tokenizer workers loaded",
    );
    assertEquals((await chat(cluster, newConversation(0))).status, 200);
    const bodies = Array.from({ length: 16 }, (_, n) => newConversation(n + 1));
    const burst = await Promise.all(bodies.map((body) => chat(cluster, body)));
    for (const [n, response] of burst.entries()) {
      assertEquals(response.status, 200);
      const expected = local.encodeChat(bodies[n].messages as ChatMessage[]).length;
      assertEquals(Number(response.headers.get("x-tidegate-prompt-tokens")), expected);
      await response.body?.cancel();
    }
    assertEquals(await metric(cluster, "tidegate_store_lookups_total", 'outcome="ok"'), 17);
    assertEquals(await metric(cluster, "tidegate_tokenizer_workers_replaced"), 0);
    assertEquals(await metric(cluster, "tidegate_tokenizer_failures_total"), 0);
  } finally {
    await cluster.close();
  }
});

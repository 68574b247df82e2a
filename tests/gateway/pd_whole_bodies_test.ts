/**
 * On a disaggregated vLLM model, what the P/D protocols do not split (Responses, Messages, the
 * load-routed routes) goes whole to one instance of the model: no prefill/decode pair, no
 * `kv_transfer_params`. The fakes run non-strict here, as vLLM serves a plain request on either
 * role (a prefill instance as an ordinary request, a decode instance prefilling locally).
 */
import { assertEquals } from "../assert.ts";
import { MODEL, startPdCluster } from "../support/pd_cluster.ts";

Deno.test("vllm-nixl P/D: Responses, Messages and tokenize go whole to one instance", async () => {
  const strict = { pd: { strict: false } };
  const t = await startPdCluster("vllm-nixl", {}, {}, { prefill: strict, decode: strict });
  try {
    const requests: [string, Record<string, unknown>][] = [
      ["/v1/responses", { model: MODEL, input: "Open the gate?", max_output_tokens: 2 }],
      ["/v1/messages", {
        model: MODEL,
        max_tokens: 2,
        messages: [{ role: "user", content: "Hi" }],
      }],
      ["/tokenize", { model: MODEL, prompt: "Hello" }],
    ];
    for (const [path, body] of requests) {
      const before = [...t.prefill, ...t.decode].map((e) => e.stats.requests.length);
      const response = await fetch(`${t.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      assertEquals(response.status, 200, `${path}: ${await response.text()}`);
      assertEquals(response.headers.get("x-tidegate-prefill-instance"), null, path);
      const after = [...t.prefill, ...t.decode].map((e) => e.stats.requests.length);
      const reached = after.map((n, i) => n - before[i]).filter((n) => n > 0);
      assertEquals(reached, [1], `${path} reached exactly one instance, once`);
      const engine = [...t.prefill, ...t.decode][after.findIndex((n, i) => n > before[i])];
      const got = engine.stats.requests.at(-1)!;
      assertEquals(got.path, path);
      assertEquals(got.pd?.kvTransferParams, undefined, path);
    }
  } finally {
    await t.close();
  }
});

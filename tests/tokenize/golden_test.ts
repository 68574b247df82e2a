import { assertEquals } from "../assert.ts";
import { goldenFile, packagedTokenizer } from "./fixtures.ts";

const golden = await goldenFile();

for (const fastPath of [true, false]) {
  const path = fastPath ? "fast path" : "exact path";

  Deno.test(`encode() reproduces all ${golden.completions.length} golden Qwen3 completions on the ${path}`, async () => {
    const tokenizer = await packagedTokenizer("qwen3", { fastPath });
    assertEquals(tokenizer.info.fastPath, fastPath);
    for (const { prompt, ids } of golden.completions) {
      assertEquals(tokenizer.encode(prompt), ids, `prompt ${JSON.stringify(prompt.slice(0, 40))}`);
    }
  });

  Deno.test(`encodeChat() reproduces all ${golden.chats.length} golden Qwen3 chats (render and ids) on the ${path}`, async () => {
    const tokenizer = await packagedTokenizer("qwen3", { fastPath });
    for (const { messages, kw, rendered, ids } of golden.chats) {
      const { tools, ...chatTemplateKwargs } = kw as { tools?: unknown[] };
      const options = { tools, chatTemplateKwargs };
      assertEquals(tokenizer.renderChat(messages, options), rendered);
      assertEquals(tokenizer.encodeChat(messages, options), ids);
    }
  });
}

Deno.test("encode() gives the same ids on a second call, served from the segment cache", async () => {
  const tokenizer = await packagedTokenizer("qwen3", { cacheMaxTokens: 100_000 });
  for (const { prompt, ids } of golden.completions) {
    tokenizer.encode(prompt);
    const before = tokenizer.stats().segmentsEncoded;
    assertEquals(tokenizer.encode(prompt), ids);
    assertEquals(tokenizer.stats().segmentsEncoded, before);
  }
});

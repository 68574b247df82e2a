/**
 * Tokens: for varied chats and completions the router's prompt tokens are the real vLLM's, as its
 * `/tokenize` returns them and as its `usage.prompt_tokens` counts them.
 */
import { assert, assertEquals } from "../assert.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import type { ChatMessage } from "../../src/tokenize/types.ts";
import { chatCases, textPrompts } from "./chat_cases.ts";
import { REAL } from "./real_env.ts";
import { startVllm } from "./vllm_engine.ts";

async function post(url: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = await response.json();
  if (!response.ok) throw new Error(`${url}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

Deno.test("real vLLM: the router's prompt tokens equal vLLM's /tokenize and usage for 50+ chats and completions", async () => {
  const engine = await startVllm();
  try {
    const tokenizer = await loadTokenizer(REAL.model);
    const model = REAL.modelName;
    const mismatches: string[] = [];
    let checked = 0;
    for (const c of chatCases()) {
      const extra = {
        ...(c.tools ? { tools: c.tools } : {}),
        ...(c.chat_template_kwargs ? { chat_template_kwargs: c.chat_template_kwargs } : {}),
      };
      const ours = tokenizer.encodeChat(c.messages as ChatMessage[], {
        tools: c.tools,
        chatTemplateKwargs: c.chat_template_kwargs,
      });
      const tokenized = await post(`${engine.url}/tokenize`, {
        model,
        messages: c.messages,
        add_generation_prompt: true,
        ...extra,
      });
      const answer = await post(`${engine.url}/v1/chat/completions`, {
        model,
        messages: c.messages,
        max_tokens: 1,
        ...extra,
      });
      const usage = (answer.usage as { prompt_tokens: number }).prompt_tokens;
      if (JSON.stringify(tokenized.tokens) !== JSON.stringify(ours) || usage !== ours.length) {
        mismatches.push(
          `chat "${c.name}": ours ${ours.length}, /tokenize ${
            (tokenized.tokens as number[]).length
          }, usage ${usage}`,
        );
      }
      checked++;
    }
    for (const prompt of textPrompts()) {
      const ours = tokenizer.encode(prompt, { addSpecialTokens: true });
      const tokenized = await post(`${engine.url}/tokenize`, { model, prompt });
      const answer = await post(`${engine.url}/v1/completions`, { model, prompt, max_tokens: 1 });
      const usage = (answer.usage as { prompt_tokens: number }).prompt_tokens;
      if (JSON.stringify(tokenized.tokens) !== JSON.stringify(ours) || usage !== ours.length) {
        mismatches.push(
          `text ${JSON.stringify(prompt.slice(0, 30))}: ours ${ours.length}, usage ${usage}`,
        );
      }
      checked++;
    }
    const ids = tokenizer.encode("token ids as the prompt ".repeat(40));
    const answer = await post(`${engine.url}/v1/completions`, {
      model,
      prompt: ids,
      max_tokens: 1,
    });
    assertEquals((answer.usage as { prompt_tokens: number }).prompt_tokens, ids.length);
    checked++;
    assert(checked >= 50, `${checked} cases`);
    assertEquals(mismatches, [], `${mismatches.length} of ${checked} differ`);
    console.log(`token parity: ${checked} chats and completions, all equal`);
  } finally {
    await engine.stop();
  }
});

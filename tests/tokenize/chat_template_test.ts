import { assert, assertEquals, assertMatch, assertThrows } from "../assert.ts";
import { ChatContentError, ChatTemplateError } from "../../src/tokenize/errors.ts";
import {
  createLocalTokenizer,
  type LocalTokenizerOptions,
} from "../../src/tokenize/local_tokenizer.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import type { ChatMessage } from "../../src/tokenize/types.ts";
import { packagedDir, packagedTokenizer, tinyTokenizerJson } from "./fixtures.ts";

function withTemplate(
  chatTemplate: unknown,
  config: Record<string, unknown> = {},
  options: LocalTokenizerOptions = {},
) {
  return createLocalTokenizer({
    tokenizerJson: tinyTokenizerJson([]),
    tokenizerConfig: { chat_template: chatTemplate, ...config },
    source: "tiny",
  }, { fastPath: false, ...options });
}

const user = (content: unknown): ChatMessage => ({ role: "user", content });

Deno.test("a chat_template list renders `default`, and `tool_use` when the request has tools", async () => {
  const tokenizer = await withTemplate([
    { name: "default", template: "D:{{ messages[0].content }}" },
    { name: "tool_use", template: "T:{{ tools | length }}:{{ messages[0].content }}" },
  ]);
  assertEquals(tokenizer.info.chatTemplates, ["default", "tool_use"]);
  assertEquals(tokenizer.renderChat([user("hi")]), "D:hi");
  assertEquals(
    tokenizer.renderChat([user("hi")], { tools: [{ type: "function", function: { name: "f" } }] }),
    "T:1:hi",
  );
});

Deno.test("chat_template.jinja in the directory wins over tokenizer_config.json's chat_template", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/tokenizer.json`, JSON.stringify(tinyTokenizerJson([])));
    await Deno.writeTextFile(
      `${dir}/tokenizer_config.json`,
      JSON.stringify({ chat_template: "config" }),
    );
    await Deno.writeTextFile(`${dir}/chat_template.jinja`, "jinja:{{ messages | length }}");
    const tokenizer = await loadTokenizer(dir, { fastPath: false });
    assertEquals(tokenizer.renderChat([user("a"), user("b")]), "jinja:2");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("raise_exception() in a template throws ChatTemplateError carrying the template's message", async () => {
  const tokenizer = await withTemplate(
    "{% if messages[0].role != 'system' %}{{ raise_exception('System message first, please') }}{% endif %}ok",
  );
  assertEquals(tokenizer.renderChat([{ role: "system", content: "s" }]), "ok");
  const error = assertThrows(() => tokenizer.encodeChat([user("x")]));
  assert(error instanceof ChatTemplateError);
  assertMatch(error.message, /System message first, please/);
});

Deno.test("a template that fails on a conversation raises ChatTemplateError, not a crash", async () => {
  const tokenizer = await withTemplate("{{ messages[0].content.no_such_method() }}");
  const error = assertThrows(() => tokenizer.renderChat([user("x")]));
  assert(error instanceof ChatTemplateError, String(error));
  assertMatch(error.message, /failed on this conversation/);
});

Deno.test("a tokenizer without a chat template rejects chat requests with a clear ChatTemplateError", async () => {
  const tokenizer = await withTemplate(undefined);
  assertEquals(tokenizer.info.chatTemplates, []);
  const error = assertThrows(() => tokenizer.encodeChat([user("x")]));
  assert(error instanceof ChatTemplateError);
  assertMatch(error.message, /no chat template/);
});

Deno.test("strftime_now() formats the injected clock as Python does (C locale, UTC)", async () => {
  const clock = () => new Date(Date.UTC(2024, 6, 5, 9, 3, 7));
  const tokenizer = await withTemplate(
    "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%A %B %-d, %H:%M:%S %p %j %y %%') }}",
    {},
    { clock },
  );
  assertEquals(
    tokenizer.renderChat([user("x")]),
    "05 Jul 2024|Friday July 5, 09:03:07 AM 187 24 %",
  );
});

Deno.test("special tokens from tokenizer_config.json, strings or AddedToken objects, are template variables", async () => {
  const tokenizer = await withTemplate(
    "{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}",
    {
      bos_token: { __type: "AddedToken", content: "<s>", lstrip: false },
      eos_token: "</s>",
    },
  );
  assertEquals(tokenizer.renderChat([user("x")]), "<s>|</s>|false");
});

Deno.test("chat_template_kwargs reach the template but cannot replace messages or add_generation_prompt", async () => {
  const tokenizer = await withTemplate(
    "{{ messages | length }}|{{ add_generation_prompt }}|{{ mood | default('none') }}",
  );
  const rendered = tokenizer.renderChat([user("x")], {
    chatTemplateKwargs: { mood: "happy", messages: [], add_generation_prompt: false },
  });
  assertEquals(rendered, "1|true|happy");
  assertEquals(tokenizer.renderChat([user("x")], { addGenerationPrompt: false }), "1|false|none");
});

Deno.test("text content parts are joined with newlines for a string-content template, as vLLM does", async () => {
  const qwen = await packagedTokenizer("qwen3");
  assertEquals(qwen.info.contentFormat, "string");
  const parts = [
    user([{ type: "text", text: "first" }, "second", { type: "input_text", text: "third" }]),
  ];
  assertEquals(qwen.renderChat(parts), qwen.renderChat([user("first\nsecond\nthird")]));
  assertEquals(qwen.encodeChat(parts), qwen.encodeChat([user("first\nsecond\nthird")]));
});

Deno.test("non-text content parts are rejected with ChatContentError for a text-only tokenizer", async () => {
  const qwen = await packagedTokenizer("qwen3");
  const image = [
    user([{ type: "text", text: "look" }, { type: "image_url", image_url: { url: "data:," } }]),
  ];
  const error = assertThrows(() => qwen.encodeChat(image));
  assert(error instanceof ChatContentError);
  assertMatch(error.message, /image_url.*text-only/);
  assert(
    assertThrows(() => qwen.encodeChat([user([{ text: "no type" }])])) instanceof ChatContentError,
  );
});

Deno.test("templates that loop over message content get OpenAI-style text parts (content format detection)", async () => {
  const tokenizer = await withTemplate(
    "{% set loop_messages = messages[1:] %}{% for m in loop_messages %}{% for c in m['content'] %}[{{ c.type }}:{{ c.text }}]{% endfor %}{% endfor %}",
  );
  assertEquals(tokenizer.info.contentFormat, "openai");
  const rendered = tokenizer.renderChat([
    { role: "system", content: "s" },
    user("plain"),
    user([{ type: "text", text: "a" }, "b"]),
  ]);
  assertEquals(rendered, "[text:plain][text:a][text:b]");
});

Deno.test("assistant tool-call arguments are parsed from JSON strings before rendering, as vLLM does", async () => {
  const qwen = await packagedTokenizer("qwen3");
  const messages: ChatMessage[] = [
    user("Weather in Paris?"),
    {
      role: "assistant",
      content: null,
      tool_calls: [
        {
          id: "c1",
          type: "function",
          function: { name: "get_weather", arguments: '{"city": "Paris"}' },
        },
        { id: "c2", type: "function", function: { name: "noop", arguments: "not json" } },
      ],
    },
    { role: "tool", tool_call_id: "c1", content: [{ type: "text", text: "sunny" }] },
  ];
  const rendered = qwen.renderChat(messages);
  assert(rendered.includes('{"name": "get_weather", "arguments": {"city": "Paris"}}'), rendered);
  assert(rendered.includes('{"name": "noop", "arguments": {}}'), rendered);
  assert(rendered.includes("<tool_response>\nsunny\n</tool_response>"), rendered);
  assertEquals(messages[1].tool_calls![0], {
    id: "c1",
    type: "function",
    function: { name: "get_weather", arguments: '{"city": "Paris"}' },
  }); // the caller's messages are not mutated
});

Deno.test("tools reach the template with every declared field for vLLM and as bare functions for SGLang", async () => {
  const template = "{{ tools | tojson }}";
  const tools = [{ function: { name: "f", strict: true }, type: "function" }];
  const vllm = await withTemplate(template);
  assertEquals(
    vllm.renderChat([user("x")], { tools }),
    '[{"type": "function", "function": {"name": "f", "description": null, "parameters": null, "strict": true}}]',
  );
  const sglang = await withTemplate(template, {}, { chatFlavor: "sglang" });
  assertEquals(
    sglang.renderChat([user("x")], { tools }),
    '[{"description": null, "name": "f", "parameters": null, "strict": true}]',
  );
  assertEquals(vllm.renderChat([user("x")]), "null"); // no tools: None, as transformers passes
});

Deno.test("the SGLang flavor joins text parts with spaces and drops non-text parts", async () => {
  const tokenizer = await withTemplate("{{ messages[0].content }}", {}, { chatFlavor: "sglang" });
  const rendered = tokenizer.renderChat([
    user([{ type: "text", text: "a" }, { type: "image_url", image_url: { url: "x" } }, {
      type: "text",
      text: "b",
    }]),
  ]);
  assertEquals(rendered, "a b");
});

Deno.test("the packaged Llama 3.1 template starts with BOS once, and completions add BOS too", async () => {
  const llama = await loadTokenizer(packagedDir("llama3_1"), {
    fastPath: false,
    cacheMaxTokens: 0,
  });
  const ids = llama.encodeChat([user("hi")]);
  assertEquals(ids[0], 128000);
  assertEquals(ids.filter((id) => id === 128000).length, 1);
  assertEquals(llama.encode("hi")[0], 128000);
  assertEquals(llama.info.specialTokens?.prefix, [128000]);
});

Deno.test("strip, lstrip and rstrip with characters strip only those, as Python does", async () => {
  const tokenizer = await withTemplate(
    "{% for m in messages %}[{{ m.content.lstrip('\\n') }}|{{ m.content.rstrip('\\n ') }}|" +
      "{{ m.content.strip('\\nx') }}|{{ m.content.strip() }}|{{ m.content.split('</think>')[-1].lstrip('\\n') }}]{% endfor %}",
  );
  assertEquals(
    tokenizer.renderChat([user("\nx  hi \n")]),
    "[x  hi \n|\nx  hi|  hi |x  hi|x  hi \n]",
  );
  assertEquals(
    tokenizer.renderChat([user("<think>r</think> tags")]),
    "[<think>r</think> tags|<think>r</think> tags|<think>r</think> tags|<think>r</think> tags| tags]",
  );
});

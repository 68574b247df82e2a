import { assertEquals, assertMatch } from "../assert.ts";
import { resolveSpecialTokenFrame } from "../../src/tokenize/special_token_frame.ts";

const ids: Record<string, number> = { "<s>": 1, "</s>": 2, "<|begin_of_text|>": 128000 };
const tokenToId = (token: string) => ids[token];

Deno.test("resolveSpecialTokenFrame() reads BOS from a TemplateProcessing nested in a Sequence (Llama 3)", () => {
  const result = resolveSpecialTokenFrame(
    {
      post_processor: {
        type: "Sequence",
        processors: [
          { type: "ByteLevel" },
          {
            type: "TemplateProcessing",
            single: [{ SpecialToken: { id: "<|begin_of_text|>" } }, { Sequence: { id: "A" } }],
            special_tokens: { "<|begin_of_text|>": { ids: [128000] } },
          },
        ],
      },
    },
    {},
    tokenToId,
  );
  assertEquals(result.ok && [result.frame.prefix, result.frame.suffix], [[128000], []]);
});

Deno.test("resolveSpecialTokenFrame() follows add_bos_token/add_eos_token for Llama-family classes, as transformers does", () => {
  const config = {
    tokenizer_class: "LlamaTokenizerFast",
    bos_token: { content: "<s>" },
    eos_token: "</s>",
    add_eos_token: true,
  };
  const result = resolveSpecialTokenFrame(
    { post_processor: { type: "ByteLevel" } },
    config,
    tokenToId,
  );
  assertEquals(result.ok && [result.frame.prefix, result.frame.suffix], [[1], [2]]);
  const noBos = resolveSpecialTokenFrame({}, {
    ...config,
    add_bos_token: false,
    add_eos_token: false,
  }, tokenToId);
  assertEquals(noBos.ok && [noBos.frame.prefix, noBos.frame.suffix], [[], []]);
  const missing = resolveSpecialTokenFrame({}, {
    tokenizer_class: "LlamaTokenizerFast",
    bos_token: "<nope>",
  }, tokenToId);
  assertEquals(missing.ok, false);
  if (!missing.ok) assertMatch(missing.reason, /bos_token/);
});

Deno.test("resolveSpecialTokenFrame() handles Roberta-style cls/sep and refuses unknown post-processors", () => {
  const roberta = resolveSpecialTokenFrame(
    { post_processor: { type: "RobertaProcessing", cls: ["<s>", 1], sep: ["</s>", 2] } },
    {},
    tokenToId,
  );
  assertEquals(roberta.ok && [roberta.frame.prefix, roberta.frame.suffix], [[1], [2]]);
  const unknown = resolveSpecialTokenFrame({ post_processor: { type: "Mystery" } }, {}, tokenToId);
  assertEquals(unknown.ok, false);
});

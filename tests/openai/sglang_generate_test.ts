import { assertEquals, assertThrows } from "../assert.ts";
import { parseGenerateRequest } from "../../src/openai/sglang_generate.ts";
import { InvalidRequestError } from "../../src/openai/request.ts";
import { engineBatchSize, sequencesOf } from "../../src/openai/engine_batch.ts";

const parse = (body: unknown) =>
  parseGenerateRequest("generate", new TextEncoder().encode(JSON.stringify(body)));

Deno.test("parseGenerateRequest() reads text and input_ids as a completions prompt", () => {
  const text = parse({ text: "hello", stream: true, model: "m" });
  assertEquals(text.prompt, { kind: "text", text: "hello", extraPromptCount: 0 });
  assertEquals([text.model, text.stream, text.endpoint], ["m", true, "generate"]);
  assertEquals(parse({ input_ids: [5, 6] }).prompt, {
    kind: "tokens",
    tokens: [5, 6],
    extraPromptCount: 0,
  });
  const batch = parse({ input_ids: [[1, 2, 3], [1, 2, 9]] }).prompt;
  assertEquals(batch, { kind: "tokens", tokens: [1, 2], extraPromptCount: 1, batchSize: 6 });
  assertEquals(parse({ text: ["ab", "ac"] }).prompt.kind, "text");
  assertEquals(parse({ input_embeds: [[0.5]] }).prompt, { kind: "opaque", chars: 24 });
  assertEquals(parse({ text: "x" }).model, "", "no model: the gateway picks the SGLang one");
});

Deno.test("parseGenerateRequest() refuses what SGLang would, naming the field", () => {
  const refused = (body: unknown) =>
    assertThrows(() => parse(body), InvalidRequestError) as InvalidRequestError;
  assertEquals(refused({}).options.param, "text");
  assertEquals(refused({ text: "a", input_ids: [1] }).options.param, "input_ids");
  assertEquals(refused({ text: [1, 2] }).options.param, "text");
  assertEquals(refused({ input_ids: "abc" }).options.param, "input_ids");
  assertEquals(refused({ input_ids: [] }).options.param, "input_ids");
  assertEquals(refused({ input_ids: [[1], [2, -1]] }).options.param, "input_ids[1][1]");
  assertEquals(
    refused({ text: "a", sampling_params: [{}, 3] }).options.param,
    "sampling_params[1]",
  );
  assertEquals(
    refused({ text: "a", sampling_params: { n: 1.5 } }).options.param,
    "sampling_params.n",
  );
  assertEquals(refused({ text: "a", stream: "yes" }).options.param, "stream");
  const model = refused({ text: 5, model: "m" });
  assertEquals(model.model, "m", "counted under the model it names");
});

Deno.test("engineBatchSize() counts prompts times samples, as SGLang normalizes a batch", () => {
  assertEquals(engineBatchSize({ prompt: "one" }), undefined);
  assertEquals(engineBatchSize({ prompt: [1, 2, 3] }), undefined, "token ids are one prompt");
  assertEquals(engineBatchSize({ prompt: ["a"] }), 1, "a list is a batch, even of one");
  assertEquals(engineBatchSize({ prompt: [[1], [2]], n: 3 }), 6);
  assertEquals(engineBatchSize({ messages: [], n: 2 }), 2);
  assertEquals(engineBatchSize({ messages: [], n: 1 }), undefined);
  assertEquals(engineBatchSize({ text: ["a", "b"] }), 2);
  assertEquals(engineBatchSize({ input_ids: [[1], [2]], sampling_params: { n: 2 } }), 4);
  assertEquals(engineBatchSize({ text: "a", sampling_params: [{ n: 2 }] }), 2);
  assertEquals(sequencesOf({ prompt: "one" }), 1);
  assertEquals(sequencesOf({ text: ["a", "b", "c"] }), 3);
});

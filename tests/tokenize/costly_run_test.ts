/**
 * One very long run of a character class (a 4 MB "word") is refused as the request's fault
 * (dispatched by load) instead of costing the tokenizer minutes of BPE merges.
 */
import { assert, assertEquals, assertThrows } from "../assert.ts";
import { TokenizeInputError } from "../../src/tokenize/errors.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import { MAX_RUN_CHARS } from "../../src/tokenize/local_tokenizer.ts";

Deno.test("a run past MAX_RUN_CHARS is refused at once; one just under it is tokenized", async () => {
  for (const fastPath of [true, false]) {
    const tokenizer = await loadTokenizer("builtin:qwen3", { fastPath, cacheMaxTokens: 0 });
    const started = performance.now();
    const error = assertThrows(
      () => tokenizer.encode(`Say: ${"a".repeat(4_000_000)}!`),
      TokenizeInputError,
    );
    assert(error.message.includes(`${MAX_RUN_CHARS}`), error.message);
    assert(performance.now() - started < 2_000, "refused by a scan, not after the merges");
    const chat = () =>
      tokenizer.encodeChat([{ role: "user", content: "\n".repeat(MAX_RUN_CHARS + 1) }]);
    assertThrows(chat, TokenizeInputError);
    const under = "b".repeat(MAX_RUN_CHARS - 1);
    assertEquals(tokenizer.encode(under), Array.from(tokenizer.encodeSegmentExact(under)));
  }
});

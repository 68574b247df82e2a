import { assert, assertEquals, assertMatch, assertRejects } from "../assert.ts";
import { TokenizerLoadError } from "../../src/tokenize/errors.ts";
import { loadTokenizer, resolveTokenizerDir } from "../../src/tokenize/load_tokenizer.ts";
import { tinyTokenizerJson } from "./fixtures.ts";

function loadError(dir: string | URL): Promise<Error> {
  return assertRejects(() => loadTokenizer(dir, { fastPath: false }), TokenizerLoadError);
}

async function withDir(files: Record<string, string>, f: (dir: string) => Promise<void>) {
  const dir = await Deno.makeTempDir();
  try {
    for (const [name, text] of Object.entries(files)) {
      await Deno.writeTextFile(`${dir}/${name}`, text);
    }
    await f(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("loadTokenizer() names the missing tokenizer.json", async () => {
  await withDir({ "tokenizer_config.json": "{}" }, async (dir) => {
    const error = await loadError(dir);
    assertEquals(error.message, `Cannot load tokenizer: file not found: ${dir}/tokenizer.json`);
  });
});

Deno.test("loadTokenizer() says when the directory does not exist or is a file", async () => {
  assertMatch(
    (await loadError("/nonexistent/tidegate-model")).message,
    /directory not found: \/nonexistent\/tidegate-model/,
  );
  await withDir({ "tokenizer.json": "{}" }, async (dir) => {
    assertMatch(
      (await loadError(`${dir}/tokenizer.json`)).message,
      /not a directory: .*give the directory/,
    );
  });
});

Deno.test("loadTokenizer() names the file that is not valid JSON", async () => {
  await withDir({
    "tokenizer.json": JSON.stringify(tinyTokenizerJson([])),
    "tokenizer_config.json": "{oops",
  }, async (dir) => {
    assertMatch(
      (await loadError(dir)).message,
      new RegExp(`${dir}/tokenizer_config.json is not valid JSON`),
    );
  });
  await withDir({ "tokenizer.json": "[1, 2]" }, async (dir) => {
    assertMatch((await loadError(dir)).message, /tokenizer.json must hold a JSON object/);
  });
});

Deno.test("loadTokenizer() rejects an unknown builtin and lists the known ones", async () => {
  assertMatch(
    (await loadError("builtin:gpt9")).message,
    /unknown builtin "gpt9" \(known: qwen3, llama3_1\)/,
  );
  assert(resolveTokenizerDir("builtin:qwen3").pathname.endsWith("/models/"));
});

Deno.test("loadTokenizer() works without tokenizer_config.json and takes special tokens from special_tokens_map.json", async () => {
  await withDir({
    "tokenizer.json": JSON.stringify(tinyTokenizerJson([["a", "b"]])),
    "special_tokens_map.json": JSON.stringify({ bos_token: { content: "<s>" } }),
    "chat_template.jinja": "{{ bos_token }}{{ messages[0].content }}",
  }, async (dir) => {
    const tokenizer = await loadTokenizer(dir, { fastPath: false });
    assertEquals(tokenizer.encode("ab"), [256]);
    assertEquals(tokenizer.renderChat([{ role: "user", content: "ab" }]), "<s>ab");
    assertEquals(tokenizer.info.source, dir);
  });
});

Deno.test("loadTokenizer() accepts file: URLs and relative paths", async () => {
  await withDir({ "tokenizer.json": JSON.stringify(tinyTokenizerJson([])) }, async (dir) => {
    const fromUrl = await loadTokenizer(new URL(`file://${dir}`), { fastPath: false });
    assertEquals(fromUrl.encode("a"), [64]);
    const relative = dir.startsWith(Deno.cwd()) ? dir.slice(Deno.cwd().length + 1) : undefined;
    if (relative) {
      assertEquals((await loadTokenizer(relative, { fastPath: false })).encode("a"), [64]);
    }
  });
});

Deno.test("split_special_tokens in tokenizer_config.json makes typed special-token text plain text", async () => {
  const added = [{
    id: 400,
    content: "<x>",
    special: true,
    normalized: false,
    lstrip: false,
    rstrip: false,
    single_word: false,
  }];
  const json = tinyTokenizerJson([], { added_tokens: added });
  for (const split of [false, true]) {
    await withDir({
      "tokenizer.json": JSON.stringify(json),
      "tokenizer_config.json": JSON.stringify({ split_special_tokens: split }),
    }, async (dir) => {
      const tokenizer = await loadTokenizer(dir);
      assertEquals(tokenizer.encode("a<x>"), split ? [64, 27, 87, 29] : [64, 400]);
    });
  }
});

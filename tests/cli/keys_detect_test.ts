import { assert, assertEquals, assertMatch } from "../assert.ts";
import { runKeys } from "../../cli/keys.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import type { KeySchemeOptions } from "../../src/hashing/types.ts";
import {
  type FakeMooncakeMaster,
  startFakeMooncakeMaster,
} from "../../src/fakes/fake_mooncake_master.ts";

const MODEL = "Qwen/Qwen3-8B";
/** A configured kv block unlike any of the engines' below. */
const LLUMNIX_SHA256 = { hash: "sha256", seed: "42", chunkSize: 128, keyFormat: "llumnix" };
const VLLM_XXHASH = {
  hash: "xxhash",
  seed: "7",
  chunkSize: 32,
  keyFormat: "vllm-mooncake-store",
};

function prompt(length: number, salt = 1): number[] {
  return Array.from({ length }, (_, i) => (i * 7919 + salt * 104729) % 151_000);
}

/** Writes every key of `tokens` as an engine with `options` would. */
function serve(master: FakeMooncakeMaster, options: KeySchemeOptions, tokens: number[]) {
  for (const key of createKeyScheme(options).chunkKeys(tokens).flat()) {
    master.put(key, "10.0.0.1:17000");
  }
}

async function detect(
  master: FakeMooncakeMaster,
  kv: Record<string, unknown>,
  tokens: number[],
  json = true,
): Promise<{ code: number; lines: string[] }> {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/router.json`;
  await Deno.writeTextFile(
    path,
    JSON.stringify({
      models: [{
        name: MODEL,
        tokenizer: { mode: "none" },
        kv: { store: "mooncake", url: master.url, ...kv },
        instances: [{ id: "gpu-a", url: "http://127.0.0.1:9", kvHost: "10.0.0.1" }],
      }],
    }),
  );
  const lines: string[] = [];
  try {
    const args = ["--config", path, "--model", MODEL, "--tokens", tokens.join(","), "--detect"];
    const code = await runKeys(json ? [...args, "--json"] : args, (l) => lines.push(l));
    return { code, lines };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function topScheme(
  written: KeySchemeOptions,
  configured: Record<string, unknown>,
  tokens = prompt(1024),
): Promise<Record<string, unknown>> {
  const master = await startFakeMooncakeMaster();
  try {
    serve(master, written, tokens);
    const { code, lines } = await detect(master, configured, tokens);
    assertEquals(code, 0, lines.join("\n"));
    const schemes = JSON.parse(lines.join("\n"));
    assert(Array.isArray(schemes) && schemes.length > 0);
    return schemes[0];
  } finally {
    await master.close();
  }
}

function pick(scheme: Record<string, unknown>, names: string[]): Record<string, unknown> {
  return Object.fromEntries(names.map((n) => [n, scheme[n]]));
}

Deno.test("keys --detect names vLLM's store connector with sha256_cbor, an unset seed and block 64", async () => {
  const written = {
    hash: "sha256_cbor" as const,
    chunkSize: 64,
    keyFormat: "vllm-mooncake-store",
    model: MODEL,
  };
  const top = await topScheme(written, LLUMNIX_SHA256);
  assertEquals(pick(top, ["hash", "seed", "chunkSize", "keyFormat", "presentChunks"]), {
    hash: "sha256_cbor",
    seed: "vllm-none-hash",
    chunkSize: 64,
    keyFormat: "vllm-mooncake-store",
    presentChunks: 16,
  });
  // The scheme it names writes the very keys the engine wrote.
  const tokens = prompt(1024);
  const { presentChunks: _, ...options } = top;
  assertEquals(
    createKeyScheme(options as unknown as KeySchemeOptions).keys(tokens),
    createKeyScheme(written).keys(tokens),
  );
});

Deno.test("keys --detect names LMCache with dtype half (float16)", async () => {
  const top = await topScheme({
    hash: "sha256_cbor",
    chunkSize: 256,
    keyFormat: "lmcache",
    model: MODEL,
    dtype: "float16",
  }, LLUMNIX_SHA256);
  assertEquals(
    pick(top, ["hash", "seed", "chunkSize", "keyFormat", "model", "dtype", "presentChunks"]),
    {
      hash: "sha256_cbor",
      seed: "vllm-none-hash",
      chunkSize: 256,
      keyFormat: "lmcache",
      model: MODEL,
      dtype: "half",
      presentChunks: 4,
    },
  );
});

Deno.test("keys --detect names SGLang HiCache with a tag, read from the store's own keys", async () => {
  const top = await topScheme({
    hash: "sha256_hex",
    chunkSize: 64,
    keyFormat: "sglang-hicache",
    model: MODEL,
    tag: "prod",
  }, LLUMNIX_SHA256);
  assertEquals(pick(top, ["hash", "chunkSize", "keyFormat", "tag", "model", "presentChunks"]), {
    hash: "sha256_hex",
    chunkSize: 64,
    keyFormat: "sglang-hicache",
    tag: "prod",
    model: MODEL,
    presentChunks: 16,
  });
});

Deno.test("keys --detect names Llumnix's defaults (sha256_cbor, seed 0, chunk 256)", async () => {
  const top = await topScheme(
    { hash: "sha256_cbor", chunkSize: 256, keyFormat: "llumnix" },
    VLLM_XXHASH,
  );
  assertEquals(pick(top, ["hash", "seed", "chunkSize", "keyFormat", "presentChunks"]), {
    hash: "sha256_cbor",
    seed: "0",
    chunkSize: 256,
    keyFormat: "llumnix",
    presentChunks: 4,
  });
});

Deno.test("keys --detect ranks the longest prefix first and prints a kv block to paste", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    const tokens = prompt(1024);
    const llumnix = createKeyScheme({ hash: "sha256_cbor", chunkSize: 128, keyFormat: "llumnix" });
    for (const key of llumnix.keys(tokens).slice(0, 2)) master.put(key, "10.0.0.1:1");
    serve(master, { hash: "sha256", seed: "", chunkSize: 16, keyFormat: "llumnix" }, tokens);
    const { code, lines } = await detect(master, LLUMNIX_SHA256, tokens, false);
    assertEquals(code, 0);
    const text = lines.join("\n");
    assertMatch(lines[1], /^#1 64 chunk\(s\) present from key 0: sha256 seed "0" chunk 16 llumnix/);
    assertMatch(lines[2], /^#2 2 chunk\(s\) present from key 0: sha256_cbor seed "0" chunk 128/);
    const block = text.slice(text.indexOf('"kv": ') + '"kv": '.length);
    assertEquals(JSON.parse(block), {
      store: "mooncake",
      url: master.url,
      hash: "sha256",
      seed: "0",
      chunkSize: 16,
      keyFormat: "llumnix",
    });
  } finally {
    await master.close();
  }
});

Deno.test("keys --detect exits 4 when no scheme matched and 3 when the store cannot be asked", async () => {
  const master = await startFakeMooncakeMaster();
  const quiet = console.error;
  const errors: string[] = [];
  console.error = (message: string) => errors.push(message);
  try {
    assertEquals((await detect(master, LLUMNIX_SHA256, prompt(512))).code, 4);
    await master.setMode("down");
    assertEquals((await detect(master, LLUMNIX_SHA256, prompt(512))).code, 3);
    assertMatch(errors.join("\n"), /store could not be asked/);
  } finally {
    console.error = quiet;
    await master.close();
  }
});

Deno.test("keys --detect answers for a 4k-token prompt within 2 s against a loopback master", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    const tokens = prompt(4096, 3);
    serve(master, {
      hash: "sha256_cbor",
      chunkSize: 64,
      keyFormat: "vllm-mooncake-store",
      model: MODEL,
    }, tokens);
    const started = performance.now();
    const { code, lines } = await detect(master, LLUMNIX_SHA256, tokens);
    const elapsedMs = performance.now() - started;
    assertEquals(code, 0);
    assertEquals(JSON.parse(lines.join("\n"))[0].presentChunks, 64);
    assert(elapsedMs < 2_000, `detect took ${Math.round(elapsedMs)} ms`);
  } finally {
    await master.close();
  }
});

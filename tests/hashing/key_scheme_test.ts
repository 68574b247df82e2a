import { deepStrictEqual, notDeepStrictEqual, strictEqual, throws } from "node:assert/strict";
import { bytesToHex } from "../../src/hashing/hex.ts";
import {
  createKeyScheme,
  describeSeed,
  HASH_ALGORITHMS,
  hashBlocks,
} from "../../src/hashing/key_scheme.ts";
import type { KeySchemeOptions } from "../../src/hashing/types.ts";

const tokens = (n: number, salt = 0) =>
  Array.from({ length: n }, (_, i) => (i * 7919 + salt) % 151936);

Deno.test("every chain shares hashes exactly up to the first chunk where two prompts differ", () => {
  const a = tokens(40);
  const b = a.slice();
  b[21] += 1; // chunk 2 of 8-token chunks
  for (const hash of HASH_ALGORITHMS) {
    const scheme = createKeyScheme({ hash, seed: "0", chunkSize: 8, keyFormat: "{hex}" });
    const ha = scheme.blockHashes(a);
    const hb = scheme.blockHashes(b);
    strictEqual(ha.length, 5, hash);
    deepStrictEqual(hb.slice(0, 2), ha.slice(0, 2), hash);
    for (let i = 2; i < 5; i++) notDeepStrictEqual(hb[i], ha[i], `${hash} chunk ${i}`);
    strictEqual(new Set(ha).size, 5, `${hash} chunk hashes are distinct`);
  }
});

Deno.test("keys, chunkKeys and blockHashes describe the same chunks", () => {
  const scheme = createKeyScheme({
    hash: "sha256_cbor",
    chunkSize: 16,
    keyFormat: "sglang-hicache",
    tpSize: 2,
    requireAllRanks: true,
  });
  const t = tokens(50);
  const hashes = scheme.blockHashes(t);
  const keys = scheme.keys(t);
  const chunkKeys = scheme.chunkKeys(t);
  strictEqual(hashes.length, 3);
  deepStrictEqual(keys, hashes.map((h) => `${h}_0_k`));
  deepStrictEqual(chunkKeys.map((k) => k[0]), keys);
  deepStrictEqual(chunkKeys[2], ["_0_k", "_0_v", "_1_k", "_1_v"].map((s) => hashes[2] + s));
});

Deno.test("saveUnfullChunk hashes a trailing partial chunk and nothing else changes", () => {
  const t = tokens(21);
  const full = createKeyScheme({ hash: "sha256", chunkSize: 8, keyFormat: "{hex}" });
  const unfull = createKeyScheme({
    hash: "sha256",
    chunkSize: 8,
    saveUnfullChunk: true,
    keyFormat: "{hex}",
  });
  strictEqual(full.blockHashes(t).length, 2);
  strictEqual(unfull.blockHashes(t).length, 3);
  deepStrictEqual(unfull.blockHashes(t).slice(0, 2), full.blockHashes(t));
  deepStrictEqual(full.blockHashes([]), []);
  deepStrictEqual(full.keys(tokens(7)), []);
});

Deno.test("typed-array and plain-array prompts give the same hashes", () => {
  const t = tokens(600);
  for (const hash of HASH_ALGORITHMS) {
    const scheme = createKeyScheme({
      hash,
      seed: "0",
      chunkSize: 256,
      saveUnfullChunk: true,
      keyFormat: "{hex}",
    });
    deepStrictEqual(scheme.blockHashes(Uint32Array.from(t)), scheme.blockHashes(t), hash);
  }
});

Deno.test("hashBlocks returns the raw digests behind the printed hashes", () => {
  const t = tokens(64);
  const lengths = {
    sha256_cbor: 32,
    sha256: 32,
    sha256_hex: 32,
    xxhash: 16,
    xxhash_cbor: 16,
    xxh64_cumulative: 8,
  };
  for (const hash of HASH_ALGORITHMS) {
    const raw = hashBlocks(t, { hash, seed: "0", chunkSize: 16 });
    const printed = createKeyScheme({ hash, seed: "0", chunkSize: 16, keyFormat: "{hex}" })
      .blockHashes(t);
    strictEqual(raw.length, 4);
    for (const d of raw) strictEqual(d.length, lengths[hash], hash);
    const asText = raw.map((d) =>
      hash === "xxh64_cumulative" ? BigInt(`0x${bytesToHex(d)}`).toString() : bytesToHex(d)
    );
    deepStrictEqual(asText, printed, hash);
  }
});

Deno.test("the seed is hashed as given; omitted, it is the engine default (docs/compat.md §2)", () => {
  const t = tokens(32);
  const hashes = (o: Partial<KeySchemeOptions>) =>
    createKeyScheme(
      { hash: "sha256_cbor", chunkSize: 16, keyFormat: "{hex}", ...o } as KeySchemeOptions,
    )
      .blockHashes(t);
  for (const hash of ["sha256_cbor", "sha256", "xxhash", "xxhash_cbor"] as const) {
    const with0 = hashes({ hash, seed: "0" });
    notDeepStrictEqual(hashes({ hash, seed: "" }), with0, `${hash}: "" is not "0"`);
    notDeepStrictEqual(hashes({ hash, seed: "42" }), with0, hash);
    deepStrictEqual(hashes({ hash, seed: "", keyFormat: "llumnix" }), hashes({ hash, seed: "0" }));
    deepStrictEqual(hashes({ hash, keyFormat: "llumnix" }), with0, `${hash}: Llumnix's default`);
  }
  for (const hash of ["sha256_cbor", "sha256"] as const) {
    deepStrictEqual(hashes({ hash }), hashes({ hash, seed: "vllm-none-hash" }), hash);
  }
  for (const hash of ["xxhash", "xxhash_cbor"] as const) {
    throws(() => hashes({ hash }), /seed is required.*PYTHONHASHSEED/s, hash);
    throws(() => hashBlocks(t, { hash, chunkSize: 16 }), /seed is required/, hash);
  }
  for (const hash of ["sha256_hex", "xxh64_cumulative"] as const) {
    deepStrictEqual(hashes({ hash, seed: "42" }), hashes({ hash }), hash);
    const scheme = createKeyScheme({ hash, seed: "42", chunkSize: 16, keyFormat: "{hex}" });
    strictEqual(scheme.options.seed, undefined);
    strictEqual(scheme.seedSource, "unseeded");
  }
});

Deno.test("a scheme names its seed and where it came from, for the start-up log", () => {
  const omitted = createKeyScheme({
    hash: "sha256",
    chunkSize: 16,
    keyFormat: "lmcache",
    model: "m",
    dtype: "half",
  });
  strictEqual(omitted.options.seed, "vllm-none-hash");
  strictEqual(omitted.seedSource, "engine-default");
  strictEqual(
    describeSeed(omitted),
    'hash sha256 roots at seed "vllm-none-hash" (seed omitted: the engine default)',
  );
  const given = createKeyScheme({ hash: "sha256", seed: "7", chunkSize: 16, keyFormat: "{hex}" });
  strictEqual(describeSeed(given), 'hash sha256 roots at seed "7" (from the config)');
});

Deno.test('a LoRA name (even "") changes every block hash of vLLM chains; an empty salt does not', () => {
  const t = tokens(32);
  for (const hash of ["sha256_cbor", "sha256", "xxhash", "xxhash_cbor"] as const) {
    for (const extraKeys of ["tagged", "plain"] as const) {
      const scheme = createKeyScheme({
        hash,
        seed: "0",
        chunkSize: 8,
        keyFormat: "{hex}",
        extraKeys,
      });
      const id = `${hash} ${extraKeys}`;
      const none = scheme.blockHashes(t);
      const lora = scheme.blockHashes(t, { loraName: "adapter-1", loraPath: "/a" });
      for (let i = 0; i < 4; i++) notDeepStrictEqual(lora[i], none[i], `${id} block ${i}`);
      deepStrictEqual(scheme.blockHashes(t, { cacheSalt: "" }), none, id);
      notDeepStrictEqual(scheme.blockHashes(t, { loraName: "", loraPath: "/a" }), none, id);
      deepStrictEqual(scheme.blockHashes(t, {}), none, id);
      notDeepStrictEqual(
        scheme.blockHashes(t, { loraName: "adapter-2", loraPath: "/a" }),
        lora,
        id,
      );
    }
  }
});

Deno.test("tagged extra keys hash the LoRA path, tell a LoRA from a salt, and need the path", () => {
  const t = tokens(16);
  for (const hash of ["sha256_cbor", "sha256", "xxhash", "xxhash_cbor"] as const) {
    const options = { hash, seed: "0", chunkSize: 8, keyFormat: "{hex}" };
    const tagged = createKeyScheme(options); // the default
    strictEqual(tagged.options.extraKeys, "tagged");
    const a = tagged.blockHashes(t, { loraName: "x", loraPath: "/a" });
    notDeepStrictEqual(tagged.blockHashes(t, { loraName: "x", loraPath: "/b" }), a, hash);
    // vLLM 0.31.0's fix: a LoRA named X and a salt X no longer share block 0.
    notDeepStrictEqual(tagged.blockHashes(t, { cacheSalt: "x" })[0], a[0], hash);
    throws(() => tagged.blockHashes(t, { loraName: "x" }), /LoRA "x" has no adapter path/);
    throws(() => tagged.blockHashes(t, { loraName: "x", loraPath: "" }), /no adapter path/);
    const plain = createKeyScheme({ ...options, extraKeys: "plain" });
    const p = plain.blockHashes(t, { loraName: "x" });
    deepStrictEqual(plain.blockHashes(t, { loraName: "x", loraPath: "/b" }), p, hash);
    deepStrictEqual(
      plain.blockHashes(t, { cacheSalt: "x" })[0],
      p[0],
      `${hash}: the old collision`,
    );
  }
});

Deno.test("extraKeys other than tagged / plain is refused with the option's meaning", () => {
  throws(
    () =>
      createKeyScheme({
        hash: "sha256",
        chunkSize: 8,
        keyFormat: "{hex}",
        extraKeys: "tag" as "tagged",
      }),
    /extraKeys must be "tagged" \(vLLM >= 0\.31\.0\) or "plain"/,
  );
});

Deno.test("the lmcache layout ignores extra keys because LMCache hashes (parent, tokens, None)", () => {
  const scheme = createKeyScheme({
    hash: "sha256_cbor",
    chunkSize: 8,
    keyFormat: "lmcache",
    model: "m",
    dtype: "bfloat16",
  });
  const t = tokens(16);
  deepStrictEqual(scheme.keys(t, { loraName: "a", cacheSalt: "s" }), scheme.keys(t));
});

Deno.test("SGLang's and Llumnix v6d's chains refuse LoRA / cache_salt instead of ignoring them", () => {
  for (const hash of ["sha256_hex", "xxh64_cumulative"] as const) {
    const scheme = createKeyScheme({ hash, seed: "0", chunkSize: 8, keyFormat: "{hex}" });
    throws(() => scheme.keys(tokens(8), { loraName: "a" }), /has no extra keys/);
    throws(() => scheme.keys(tokens(8), { loraName: "" }), /has no extra keys/);
    deepStrictEqual(scheme.keys(tokens(8), { cacheSalt: "" }), scheme.keys(tokens(8)));
  }
});

Deno.test("token ids that an engine could not have produced are rejected with their index", () => {
  for (const hash of HASH_ALGORITHMS) {
    const scheme = createKeyScheme({ hash, seed: "0", chunkSize: 2, keyFormat: "{hex}" });
    throws(() => scheme.blockHashes([1, 2, 3, 0.5]), /index 3/, hash);
  }
  const sglang = createKeyScheme({ hash: "sha256_hex", chunkSize: 2, keyFormat: "{hex}" });
  throws(() => sglang.blockHashes([1, -1]), /uint32/);
});

Deno.test("createKeyScheme lists every invalid option in one error that says what to use", () => {
  throws(
    () =>
      createKeyScheme({
        hash: "md5",
        chunkSize: 0,
        keyFormat: "{tokens}",
        tpRank: 1,
      } as unknown as KeySchemeOptions),
    (e: Error) =>
      /Unknown hash "md5": use one of sha256_cbor, sha256, xxhash/.test(e.message) &&
      /chunkSize must be an integer >= 1/.test(e.message) &&
      /unknown placeholder \{tokens\}/.test(e.message) &&
      /tpRank \(1\) must be < tpSize \(1\)/.test(e.message),
  );
  throws(
    () => createKeyScheme({ hash: "sha256", chunkSize: 1.5, keyFormat: "llumnix" }),
    /chunkSize/,
  );
  throws(
    () => createKeyScheme({ hash: "sha256", chunkSize: 16, keyFormat: "my-format" }),
    /\{hex\}/,
  );
  throws(() => createKeyScheme(undefined as unknown as KeySchemeOptions), /options object/);
});

Deno.test("a scheme exposes its options frozen, with the defaults it applied", () => {
  const scheme = createKeyScheme({
    hash: "sha256_cbor",
    seed: "",
    chunkSize: 256,
    keyFormat: "llumnix",
  });
  strictEqual(scheme.options.seed, "0");
  strictEqual(scheme.options.saveUnfullChunk, false);
  strictEqual(scheme.options.requireAllRanks, false);
  strictEqual(Object.isFrozen(scheme.options), true);
});

Deno.test("a custom template can number chunks with {i}", () => {
  const scheme = createKeyScheme({ hash: "sha256_hex", chunkSize: 4, keyFormat: "c{i}:{hex}" });
  const t = tokens(12);
  deepStrictEqual(scheme.keys(t), scheme.blockHashes(t).map((h, i) => `c${i}:${h}`));
});

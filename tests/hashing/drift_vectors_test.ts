import { deepStrictEqual, strictEqual, throws } from "node:assert/strict";
import { createKeyFormatter, createKeyScheme } from "../../src/hashing/key_scheme.ts";
import type { ExtraKeys, KeySchemeOptions, SeedSource } from "../../src/hashing/types.ts";

/** One engine drift of docs/compat.md §2-3, with keys from tests/data/gen_drift_golden.py. */
interface DriftCase {
  name: string;
  drift: string;
  options: KeySchemeOptions;
  tokens: number[];
  extra?: ExtraKeys;
  expect: {
    seed?: string;
    seedSource?: SeedSource;
    blockHashes?: string[];
    keys?: string[];
    chunkKeys?: string[][];
  };
}

const golden: {
  cases: DriftCase[];
  errors: { name: string; options: KeySchemeOptions; error: string }[];
} = JSON.parse(
  await Deno.readTextFile(new URL("../data/drift_vectors.json", import.meta.url)),
);

Deno.test("drift_vectors.json covers every engine drift docs/compat.md §2-3 names", () => {
  deepStrictEqual(
    new Set(golden.cases.map((c) => c.drift)),
    new Set([
      "seed",
      "hashBlockSize",
      "numKvHeads",
      "groups",
      "dcpSize",
      "pcpSize",
      "loraEmpty",
      "sglangTag",
      "tpLcmSize",
      "lmcache",
      "llumnixSha256Hex",
    ]),
  );
});

for (const drift of new Set(golden.cases.map((c) => c.drift))) {
  Deno.test(`drift "${drift}": tidegate reproduces the reference keys`, async (t) => {
    for (const c of golden.cases.filter((c) => c.drift === drift)) {
      await t.step(c.name, () => {
        // gen_drift_golden.py writes vLLM's extra keys as they were up to 0.30: plain.
        const scheme = createKeyScheme({ extraKeys: "plain", ...c.options });
        const { expect } = c;
        if ("seed" in expect) strictEqual(scheme.options.seed, expect.seed);
        if (expect.seedSource) strictEqual(scheme.seedSource, expect.seedSource);
        if (expect.blockHashes) {
          deepStrictEqual(scheme.blockHashes(c.tokens, c.extra), expect.blockHashes);
        }
        if (expect.keys) deepStrictEqual(scheme.keys(c.tokens, c.extra), expect.keys);
        if (expect.chunkKeys) {
          deepStrictEqual(scheme.chunkKeys(c.tokens, c.extra), expect.chunkKeys);
          // The same keys from the frozen options alone (what `deno task keys` does).
          const hashes = scheme.blockHashes(c.tokens, c.extra);
          deepStrictEqual(createKeyFormatter(scheme.options).chunkKeys(hashes), expect.chunkKeys);
        }
      });
    }
  });
}

Deno.test("start-up errors say what to set when an engine default cannot match", async (t) => {
  for (const e of golden.errors) {
    await t.step(e.name, () => {
      throws(() => createKeyScheme(e.options), (err: Error) => err.message.includes(e.error));
    });
  }
});

/**
 * Block hashes: the hashes the real vLLM publishes in its KV events for a prompt equal the
 * router's chain for it, for sha256 (pickle) and sha256_cbor, with vLLM's default root (no
 * PYTHONHASHSEED) and with a set seed, with and without `cache_salt`.
 */
import { assert, assertEquals } from "../assert.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import type { ExtraKeys } from "../../src/hashing/types.ts";
import { startKvEventLog } from "./kv_event_log.ts";
import { REAL } from "./real_env.ts";
import { CPU_BLOCK_SIZE, startVllm, type VllmEngine } from "./vllm_engine.ts";

interface Setting {
  hash: "sha256" | "sha256_cbor";
  seed?: string;
  /** Events with whole digests; by default vLLM publishes each hash's low 64 bits as an int. */
  wholeDigests?: boolean;
}

const SETTINGS: Setting[] = [
  { hash: "sha256" },
  { hash: "sha256_cbor", wholeDigests: true },
  { hash: "sha256_cbor", seed: "20261127" },
];

/**
 * The router's digest as the event shows it: whole (hex), or vLLM's
 * `int.from_bytes(digest, "big") & (2**64 - 1)` (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES, the default).
 */
function asPublished(hex: string, whole: boolean): string {
  return whole ? hex : `int:${BigInt(`0x${hex.slice(-16)}`)}`;
}

/** A prompt of `blocks` full blocks and a few tokens more, different for each `n`. */
function prompt(n: number, blocks: number): number[] {
  return Array.from(
    { length: blocks * CPU_BLOCK_SIZE + 7 },
    (_, i) => 1000 + ((i * 31 + n * 977) % 50_000),
  );
}

async function complete(engine: VllmEngine, tokens: number[], extra: ExtraKeys): Promise<void> {
  const response = await fetch(`${engine.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: REAL.modelName,
      prompt: tokens,
      max_tokens: 1,
      ...(extra.cacheSalt ? { cache_salt: extra.cacheSalt } : {}),
    }),
  });
  if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);
  await response.body?.cancel();
}

Deno.test("real vLLM: its KV-event block hashes equal the router's chains (sha256, sha256_cbor, default root and a seed, cache_salt)", async () => {
  const logs = await Promise.all(SETTINGS.map(() => startKvEventLog()));
  const engines: VllmEngine[] = [];
  try {
    engines.push(
      ...await Promise.all(SETTINGS.map((s, i) =>
        startVllm({
          hashAlgo: s.hash,
          seed: s.seed,
          kvEventsEndpoint: logs[i].endpoint,
          env: s.wholeDigests ? { VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES: "0" } : {},
          startTimeoutMs: 600_000,
        })
      )),
    );
    let compared = 0;
    for (const [i, setting] of SETTINGS.entries()) {
      const scheme = createKeyScheme({
        hash: setting.hash,
        seed: setting.seed,
        chunkSize: CPU_BLOCK_SIZE,
        // A custom layout follows vLLM's default root; the llumnix preset would root at "0".
        keyFormat: "{hex}",
      });
      const cases: [number[], ExtraKeys][] = [
        [prompt(i * 10 + 1, 3), {}],
        [prompt(i * 10 + 2, 4), {}],
        [prompt(i * 10 + 3, 3), { cacheSalt: "tenant-a" }],
      ];
      for (const [tokens, extra] of cases) {
        await complete(engines[i], tokens, extra);
        const blocks = Math.floor(tokens.length / CPU_BLOCK_SIZE);
        const theirs = await logs[i].waitFor((events) => blockHashesOf(events, tokens, blocks));
        const ours = scheme.blockHashes(tokens, extra).map((hex) =>
          asPublished(hex, setting.wholeDigests === true)
        );
        assertEquals(
          ours,
          theirs,
          `${setting.hash} seed ${setting.seed ?? "(default)"} ${JSON.stringify(extra)}`,
        );
        compared += blocks;
      }
    }
    assert(compared >= 30, `${compared} block hashes compared`);
    console.log(
      `hash parity: ${compared} block hashes over ${SETTINGS.length} settings, all equal`,
    );
  } finally {
    await Promise.all(engines.map((e) => e.stop()));
    await Promise.all(logs.map((l) => l.close()));
  }
});

/**
 * The published hash of each of `tokens`' first `blocks` blocks: a BlockStored event lists
 * consecutive blocks' hashes with their token ids concatenated.
 */
function blockHashesOf(
  events: readonly { type: string; block_hashes?: string[]; token_ids?: number[] }[],
  tokens: number[],
  blocks: number,
): string[] | undefined {
  const byBlock = new Map<string, string>();
  for (const event of events) {
    if (event.type !== "BlockStored" || !event.token_ids || !event.block_hashes) continue;
    event.block_hashes.forEach((hash, j) => {
      const ids = event.token_ids!.slice(j * CPU_BLOCK_SIZE, (j + 1) * CPU_BLOCK_SIZE).join();
      byBlock.set(ids, hash);
    });
  }
  const out: string[] = [];
  for (let b = 0; b < blocks; b++) {
    const hash = byBlock.get(tokens.slice(b * CPU_BLOCK_SIZE, (b + 1) * CPU_BLOCK_SIZE).join());
    if (hash === undefined) return undefined;
    out.push(hash);
  }
  return out;
}

import { blockId } from "./engine_kv_event.ts";
import { EngineBlockIndex } from "./engine_block_index.ts";

/**
 * The mirrors of one model's engines that publish KV events (instances with `kvEvents`), and
 * what they say about a prompt: per instance whose mirror is exact, how many of its leading
 * blocks the engine holds itself. The router's block hashes are the engine's (same chain, same
 * seed: docs/keys.md) only at the engine's own block size, so a mirror whose engine reports
 * another block size than `kv.chunkSize` says nothing.
 * Pure: src/runtime/background_work.ts runs the feeds that fill the mirrors.
 */
export class EngineCaches {
  readonly #indexes = new Map<string, EngineBlockIndex>();
  readonly #chunkSize: number;

  constructor(instanceIds: readonly string[], chunkSize: number) {
    this.#chunkSize = chunkSize;
    for (const id of instanceIds) this.#indexes.set(id, new EngineBlockIndex());
  }

  get size(): number {
    return this.#indexes.size;
  }

  get(instanceId: string): EngineBlockIndex | undefined {
    return this.#indexes.get(instanceId);
  }

  entries(): IterableIterator<[string, EngineBlockIndex]> {
    return this.#indexes.entries();
  }

  /** Per instance with an exact mirror: leading blocks of the prompt its engine holds. */
  prefixes(blockHashes: readonly string[]): Map<string, number> {
    const out = new Map<string, number>();
    if (this.#indexes.size === 0 || blockHashes.length === 0) return out;
    const ids = blockHashes.map(blockId);
    for (const [instanceId, index] of this.#indexes) {
      if (index.blockSize !== undefined && index.blockSize !== this.#chunkSize) continue;
      const blocks = index.prefixBlocks(ids);
      if (blocks !== undefined) out.set(instanceId, blocks);
    }
    return out;
  }
}

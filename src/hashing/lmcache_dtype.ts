/**
 * LMCache's `TORCH_DTYPE_TO_STR_DTYPE` (docs/compat.md §3): the key's last field spells the KV
 * dtype LMCache's way (`half` for float16, `fp8_e4m3fn` for float8_e4m3fn, ...). Torch names and
 * LMCache's own spellings are both accepted.
 */
const TORCH_TO_LMCACHE: Readonly<Record<string, string>> = {
  float16: "half",
  half: "half",
  bfloat16: "bfloat16",
  float32: "float",
  float: "float",
  float64: "double",
  double: "double",
  int8: "int8",
  uint8: "uint8",
  int16: "int16",
  int32: "int32",
  int64: "int64",
  bool: "bool",
  float8_e4m3fn: "fp8_e4m3fn",
  float8_e4m3fnuz: "fp8_e4m3fnuz",
  float8_e5m2: "fp8_e5m2",
  float8_e5m2fnuz: "fp8_e5m2fnuz",
};

const LMCACHE_SPELLINGS = new Set(Object.values(TORCH_TO_LMCACHE));

/** LMCache's spelling of a torch dtype name (`torch.` prefix allowed), or undefined. */
export function lmcacheDtype(dtype: string): string | undefined {
  const name = dtype.startsWith("torch.") ? dtype.slice("torch.".length) : dtype;
  if (Object.hasOwn(TORCH_TO_LMCACHE, name)) return TORCH_TO_LMCACHE[name];
  return LMCACHE_SPELLINGS.has(name) ? name : undefined;
}

/** The error for a dtype LMCache does not know, with every accepted name. */
export function unknownDtypeProblem(dtype: string): string {
  const names = Object.entries(TORCH_TO_LMCACHE)
    .filter(([torch]) => !["half", "float", "double"].includes(torch))
    .map(([torch, written]) => (torch === written ? torch : `${torch} (written "${written}")`));
  return `dtype ${JSON.stringify(dtype)} is not a KV dtype LMCache knows: use the engine's ` +
    `torch dtype, one of ${names.join(", ")}`;
}

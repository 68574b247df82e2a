"""One Mooncake store client (the real transfer engine's, from the mooncake wheel) whose segment
is published under a given host, for tests that fill a real mooncake_master as an engine on that
host would. Reads JSON commands from stdin, one per line, and answers each with a JSON line:
  {"put": [keys]}     puts a small value under each key      -> {"ok": true, "failed": [keys]}
  {"remove": [keys]}  removes them                           -> {"ok": true}
Prints {"ready": true} once set up.

usage: store_client.py LOCAL_HOSTNAME MASTER_ADDRESS   (e.g. 127.0.0.2 127.0.0.1:50051)
"""
import json
import sys

from mooncake.store import MooncakeDistributedStore

host, master = sys.argv[1], sys.argv[2]
store = MooncakeDistributedStore()
rc = store.setup(host, "P2PHANDSHAKE", 64 << 20, 16 << 20, "tcp", "", master)
if rc != 0:
    print(json.dumps({"ready": False, "error": f"setup returned {rc}"}), flush=True)
    sys.exit(1)
print(json.dumps({"ready": True}), flush=True)
value = b"kv" * 512
for line in sys.stdin:
    command = json.loads(line)
    if "put" in command:
        keys = command["put"]
        failed = []
        for start in range(0, len(keys), 1000):
            batch = keys[start:start + 1000]
            codes = store.put_batch(batch, [value] * len(batch))
            codes = codes if isinstance(codes, list) else [codes] * len(batch)
            failed += [key for key, code in zip(batch, codes) if code != 0]
        print(json.dumps({"ok": True, "failed": failed}), flush=True)
    elif "remove" in command:
        for key in command["remove"]:
            store.remove(key)
        print(json.dumps({"ok": True}), flush=True)
store.close()

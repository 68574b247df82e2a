"""Subscribes to one vLLM engine's KV events (its ZMQ publisher connects here) and prints each
event as a JSON line: the type, block hashes as hex, the parent's, token count, block size,
extra keys and medium. Decoded with vLLM's own msgspec structs, so the format is the engine's.
Prints {"ready": true} once bound; runs until its stdin closes.

usage: kv_events_sub.py ENDPOINT   (e.g. tcp://127.0.0.1:5557)
"""
import json
import sys
import threading

import msgspec
import zmq
from vllm.distributed.kv_events import KVEventBatch


def hexed(value):
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, int):
        return f"int:{value}"
    return value


def plain(value):
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def main():
    context = zmq.Context()
    socket = context.socket(zmq.SUB)
    socket.bind(sys.argv[1])
    socket.setsockopt(zmq.SUBSCRIBE, b"")
    decoder = msgspec.msgpack.Decoder(type=KVEventBatch)
    stopped = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stopped.set()), daemon=True).start()
    print(json.dumps({"ready": True}), flush=True)
    while not stopped.is_set():
        if not socket.poll(200):
            continue
        _topic, seq, payload = socket.recv_multipart()
        batch = decoder.decode(payload)
        for event in batch.events:
            out = {"type": type(event).__name__, "seq": int.from_bytes(seq, "big")}
            for field in ("block_hashes", "parent_block_hash", "block_size", "medium",
                          "lora_name", "extra_keys", "group_idx"):
                if hasattr(event, field):
                    value = getattr(event, field)
                    out[field] = [hexed(v) for v in value] if field == "block_hashes" else (
                        hexed(value) if field == "parent_block_hash" else plain(value))
            if getattr(event, "token_ids", None) is not None:
                out["token_ids"] = list(event.token_ids)
            print(json.dumps(out), flush=True)


main()

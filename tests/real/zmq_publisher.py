"""A ZMQ publisher as vLLM's ZmqEventPublisher lays it out (vllm/distributed/kv_events.py): PUB
frames [topic, seq (8 bytes big-endian), payload] and a ROUTER answering a replay request with the
buffered messages from a seq on, then an end marker of seq -1. Driven over stdin, one command a
line: `pub SEQ SIZE` publishes seq SEQ with a SIZE-byte payload (kept in the replay buffer),
`drop SEQ SIZE` only buffers it (a message the subscriber never sees), `raw SEQ HEX` publishes the
payload given in hex (e.g. a Mooncake master's event batch). Prints "ready" once bound.

usage: zmq_publisher.py PUB_ENDPOINT REPLAY_ENDPOINT
"""
import sys
import threading

import zmq


def main():
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.bind(sys.argv[1])
    router = ctx.socket(zmq.ROUTER)
    router.bind(sys.argv[2])
    buffer = []
    lock = threading.Lock()

    def serve():
        while True:
            client, _, start = router.recv_multipart()
            first = int.from_bytes(start, "big")
            with lock:
                replay = [(seq, payload) for seq, payload in buffer if seq >= first]
            for seq, payload in replay:
                router.send_multipart([client, b"", b"", seq.to_bytes(8, "big"), payload])
            router.send_multipart([client, b"", b"", (-1).to_bytes(8, "big", signed=True), b""])

    threading.Thread(target=serve, daemon=True).start()
    print("ready", flush=True)
    for line in sys.stdin:
        verb, seq, arg = line.split()
        seq = int(seq)
        if verb == "raw":
            payload = bytes.fromhex(arg)
        else:
            payload = bytes((seq + i) % 256 for i in range(int(arg)))
        with lock:
            buffer.append((seq, payload))
        if verb in ("pub", "raw"):
            pub.send_multipart([b"", seq.to_bytes(8, "big"), payload])
        print(f"done {seq}", flush=True)


main()

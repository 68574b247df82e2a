/**
 * tidegate's ZMTP client (src/runtime/kv_event_sockets.ts) against libzmq itself (pyzmq, from
 * the real-engine suite's .venv) laid out as vLLM's KV event publisher: messages, short and long
 * frames, the replay ROUTER, and a publisher that goes away and comes back on the same endpoint.
 */
import { assert, assertEquals } from "../assert.ts";
import { eventually } from "../support/eventually.ts";
import { zmtpSockets } from "../../src/runtime/kv_event_sockets.ts";
import { freePort } from "./real_env.ts";
import { startPublisher } from "./zmq_publisher.ts";

const seqOf = (frame: Uint8Array) =>
  Number(new DataView(frame.buffer, frame.byteOffset, 8).getBigInt64(0));
const payload = (seq: number, size: number) =>
  Uint8Array.from({ length: size }, (_, i) => (seq + i) % 256);

Deno.test("ZMTP client against libzmq: messages, long frames, replay, and a publisher restart", async () => {
  const dir = await Deno.makeTempDir({ prefix: "tidegate-zmtp-" });
  const pubEndpoint = `ipc://${dir}/pub.sock`;
  const replayEndpoint = `tcp://127.0.0.1:${freePort()}`;
  let publisher = await startPublisher(pubEndpoint, replayEndpoint);
  const sockets = zmtpSockets({ reconnectMs: 100 });
  const subscription = sockets.subscribe(pubEndpoint, "");
  const received: Uint8Array[][] = [];
  const reading = (async () => {
    for await (const frames of subscription) received.push(frames);
  })();
  try {
    // A subscriber joins a moment after it connects: publish until one message arrives.
    let seq = 0;
    await eventually(
      async () => {
        await publisher.send("pub", seq++, 10);
        return received.length > 0;
      },
      10_000,
      "the first message",
    );
    const sizes = [0, 255, 256, 70_000];
    const from = seq;
    for (const size of sizes) await publisher.send("pub", seq++, size);
    await eventually(() => received.some((m) => seqOf(m[1]) === seq - 1), 10_000, "the sizes");
    for (const [i, size] of sizes.entries()) {
      const frames = received.find((m) => seqOf(m[1]) === from + i)!;
      assertEquals(frames.length, 3);
      assertEquals(frames[2], payload(from + i, size), `a ${size}-byte payload`);
    }

    // The replay brings what the subscriber never saw.
    await publisher.send("drop", seq++, 40);
    const replayed = await sockets.replay(replayEndpoint, BigInt(from), 5_000);
    assert(replayed !== null, "the replay answered");
    assertEquals(replayed.map((m) => seqOf(m[1])), [from, from + 1, from + 2, from + 3, from + 4]);
    assertEquals(replayed.at(-1)![2], payload(from + 4, 40));

    // The publisher goes away and a new one binds the same endpoints: the subscription follows.
    await publisher.stop();
    publisher = await startPublisher(pubEndpoint, replayEndpoint);
    const before = received.length;
    let restarted = 0;
    await eventually(
      async () => {
        await publisher.send("pub", restarted++, 5);
        return received.length > before;
      },
      20_000,
      "a message from the new publisher",
    );
    assert(seqOf(received.at(-1)![1]) < restarted, "the new publisher's own sequence");
  } finally {
    subscription.close();
    await reading;
    await publisher.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

Deno.test("ZMTP client: a replay from nobody is null within its timeout", async () => {
  const sockets = zmtpSockets();
  const started = performance.now();
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 }); // accepts, never answers
  const port = (listener.addr as Deno.NetAddr).port;
  const accepted = listener.accept();
  try {
    assertEquals(await sockets.replay(`tcp://127.0.0.1:${port}`, 0n, 300), null);
    assert(performance.now() - started < 5_000);
    assertEquals(await sockets.replay(`tcp://127.0.0.1:${freePort()}`, 0n, 300), null);
  } finally {
    (await accepted.catch(() => undefined))?.close();
    listener.close();
  }
});

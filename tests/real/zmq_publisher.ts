/**
 * A libzmq publisher (pyzmq, tests/real/zmq_publisher.py) laid out as vLLM's KV event publisher,
 * driven from a test: publish, buffer without publishing, or publish given payload bytes.
 */
import { assertEquals } from "../assert.ts";
import { REAL, requireRealPrograms } from "./real_env.ts";

const SCRIPT = new URL("./zmq_publisher.py", import.meta.url).pathname;

export interface Publisher {
  /** Publishes (or, with `drop`, only buffers) seq `seq` with a `size`-byte payload. */
  send(verb: "pub" | "drop", seq: number, size: number): Promise<void>;
  /** Publishes `payload` as seq `seq`. */
  raw(seq: number, payload: Uint8Array): Promise<void>;
  stop(): Promise<void>;
}

export async function startPublisher(pub: string, replay: string): Promise<Publisher> {
  requireRealPrograms();
  const child = new Deno.Command(REAL.python, {
    args: [SCRIPT, pub, replay],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  const nextLine = async () => {
    while (!buffered.includes("\n")) {
      const { value, done } = await lines.read();
      if (done) throw new Error("the publisher exited");
      buffered += value;
    }
    const at = buffered.indexOf("\n");
    const line = buffered.slice(0, at);
    buffered = buffered.slice(at + 1);
    return line;
  };
  assertEquals(await nextLine(), "ready");
  const stdin = child.stdin.getWriter();
  return {
    async send(verb, seq, size) {
      await stdin.write(new TextEncoder().encode(`${verb} ${seq} ${size}\n`));
      assertEquals(await nextLine(), `done ${seq}`);
    },
    async raw(seq, payload) {
      const hex = Array.from(payload, (b) => b.toString(16).padStart(2, "0")).join("");
      await stdin.write(new TextEncoder().encode(`raw ${seq} ${hex || "00"}\n`));
      assertEquals(await nextLine(), `done ${seq}`);
    },
    async stop() {
      await stdin.close().catch(() => {});
      child.kill("SIGTERM");
      await child.status;
      await lines.cancel().catch(() => {});
    },
  };
}

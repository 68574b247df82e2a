import { systemTimers, type Timers } from "../cluster/timers.ts";
import {
  checkGreeting,
  greeting,
  GREETING_BYTES,
  message,
  readyCommand,
  subscription,
  ZmtpReader,
} from "../kv/events/zmtp_codec.ts";
import type {
  KvEventSockets,
  KvEventSubscription,
  SubscriptionHooks,
} from "./engine_event_feed.ts";

/**
 * The real sockets of the KV event feeds: a small ZMTP 3.0 client (src/kv/events/zmtp_codec.ts)
 * over Deno's TCP and Unix sockets, `tcp://host:port` and `ipc://path`. (The `zeromq` npm
 * package's native addon loads under Deno, but crashed the process on its first DEALER reply
 * here: a segmentation fault, 2026-11-27, zeromq 6.8.0 on Deno 2.9.6.)
 *
 * - subscribe: a SUB peer that connects, subscribes and yields each message; when the publisher
 *   goes away it connects again every `reconnectMs` until closed. It reads as fast as the feed
 *   consumes: a slower feed leaves the messages in the socket buffers, and the publisher drops
 *   them past its high-water mark, which the mirror sees as a sequence gap.
 * - replay: a DEALER to vLLM's replay ROUTER: `["", seq]` out, `["", topic, seq, payload]` back
 *   per buffered batch, ending with a seq of -1; null when it fails or `timeoutMs` passes.
 */
export function zmtpSockets(
  options: { reconnectMs?: number; connectTimeoutMs?: number; timers?: Timers } = {},
): KvEventSockets {
  const timers = options.timers ?? systemTimers();
  const reconnectMs = options.reconnectMs ?? 1_000;
  const connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
  return {
    subscribe: (endpoint, topic, hooks = {}) =>
      subscriber(endpoint, topic, { reconnectMs, connectTimeoutMs, timers }, hooks),
    async replay(endpoint, from, timeoutMs) {
      const deadline = withDeadline(timers, timeoutMs);
      let peer: ZmtpPeer | undefined;
      try {
        peer = await connectWithin(endpoint, "DEALER", deadline);
        const seq = new Uint8Array(8);
        new DataView(seq.buffer).setBigInt64(0, from);
        await deadline.race(peer.write(message([new Uint8Array(0), seq])));
        const replies: Uint8Array[][] = [];
        for (;;) {
          const parts = await deadline.race(peer.next());
          if (parts === null) return null;
          const frames = parts.slice(1); // the empty delimiter the ROUTER puts first
          if (frames.length >= 2 && isEndMarker(frames[1])) return replies;
          replies.push(frames);
        }
      } catch {
        return null;
      } finally {
        deadline.clear();
        peer?.close();
      }
    },
  };
}

function isEndMarker(seq: Uint8Array): boolean {
  return seq.byteLength === 8 &&
    new DataView(seq.buffer, seq.byteOffset, 8).getBigInt64(0) === -1n;
}

function subscriber(
  endpoint: string,
  topic: string,
  options: { reconnectMs: number; connectTimeoutMs: number; timers: Timers },
  hooks: SubscriptionHooks,
): KvEventSubscription {
  let closed = false;
  let peer: ZmtpPeer | undefined;
  let wake: (() => void) | undefined;
  let connected = false;
  return {
    close() {
      closed = true;
      peer?.close();
      wake?.();
    },
    async *[Symbol.asyncIterator]() {
      while (!closed) {
        const deadline = withDeadline(options.timers, options.connectTimeoutMs);
        try {
          peer = await connectWithin(endpoint, "SUB", deadline);
          deadline.clear();
          if (closed) break;
          await peer.write(subscription(topic));
          connected = true;
          hooks.onConnect?.();
          for (;;) {
            const parts = await peer.next();
            if (parts === null) break;
            yield parts;
          }
        } catch {
          // Refused, reset or timed out: try again after the pause below.
        } finally {
          deadline.clear();
          peer?.close();
          peer = undefined;
          if (connected) hooks.onDisconnect?.();
          connected = false;
        }
        if (closed) break;
        await new Promise<void>((resolve) => {
          wake = resolve;
          options.timers.setTimeout(resolve, options.reconnectMs);
        });
      }
    },
  };
}

/** A peer connected before the deadline; one connected after it is closed at once. */
async function connectWithin(
  endpoint: string,
  socketType: string,
  deadline: ReturnType<typeof withDeadline>,
): Promise<ZmtpPeer> {
  const pending = connectPeer(endpoint, socketType);
  try {
    return await deadline.race(pending);
  } catch (error) {
    pending.then((peer) => peer.close(), () => {});
    throw error;
  }
}

/** One connected, handshaken ZMTP peer. */
interface ZmtpPeer {
  write(bytes: Uint8Array): Promise<void>;
  /** The next message (commands skipped); null when the connection ended. */
  next(): Promise<Uint8Array[] | null>;
  close(): void;
}

async function connectPeer(endpoint: string, socketType: string): Promise<ZmtpPeer> {
  const conn = await dial(endpoint);
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    try {
      conn.close();
    } catch {
      // already closed
    }
  };
  try {
    await writeAll(conn, greeting());
    await writeAll(conn, readyCommand(socketType));
    const reader = new ZmtpReader();
    const queue: Uint8Array[][] = [];
    const chunk = new Uint8Array(64 * 1024);
    let head: Uint8Array = new Uint8Array(0);
    while (head.length < GREETING_BYTES) {
      const n = await conn.read(chunk);
      if (n === null) throw new Error(`${endpoint} closed during the greeting`);
      head = join(head, chunk.subarray(0, n));
    }
    checkGreeting(head);
    let ready = false;
    const take = (bytes: Uint8Array) => {
      for (const item of reader.push(bytes)) {
        if (item.kind === "command") ready ||= item.name === "READY";
        else queue.push(item.parts);
      }
    };
    take(head.slice(GREETING_BYTES));
    while (!ready) {
      const n = await conn.read(chunk);
      if (n === null) throw new Error(`${endpoint} closed before READY`);
      take(chunk.slice(0, n));
    }
    return {
      write: (bytes) => writeAll(conn, bytes),
      async next() {
        while (queue.length === 0) {
          const n = closed ? null : await conn.read(chunk).catch(() => null);
          if (n === null) return null;
          take(chunk.slice(0, n));
        }
        return queue.shift()!;
      },
      close,
    };
  } catch (error) {
    close();
    throw error;
  }
}

function dial(endpoint: string): Promise<Deno.Conn> {
  const tcp = endpoint.match(/^tcp:\/\/(\[[^\]]+\]|[^:]+):(\d+)$/);
  if (tcp) {
    return Deno.connect({ hostname: tcp[1].replace(/^\[|\]$/g, ""), port: Number(tcp[2]) });
  }
  if (endpoint.startsWith("ipc://")) {
    return Deno.connect({ transport: "unix", path: endpoint.slice("ipc://".length) });
  }
  return Promise.reject(new Error(`not a tcp:// or ipc:// endpoint: ${endpoint}`));
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let at = 0;
  while (at < bytes.length) at += await conn.write(bytes.subarray(at));
}

function join(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** A timeout that rejects whatever it races, until cleared. */
function withDeadline(timers: Timers, ms: number) {
  let reject: ((error: Error) => void) | undefined;
  const expired = new Promise<never>((_, r) => reject = r);
  expired.catch(() => {});
  const handle = timers.setTimeout(() => reject?.(new Error(`timed out after ${ms} ms`)), ms);
  return {
    race: <T>(promise: Promise<T>) => Promise.race([promise, expired]),
    clear: () => timers.clearTimeout(handle),
  };
}

/**
 * The bytes of ZMTP 3.0 (ZeroMQ's wire protocol, rfc.zeromq.org/spec/23) that a SUB or DEALER
 * peer with the NULL mechanism needs: its greeting, its READY command, message frames, and a
 * reader that turns received bytes into whole multipart messages. A 3.0 greeting makes libzmq
 * (vLLM's pyzmq, the Mooncake master) speak 3.0 to us: subscriptions are messages starting with 1.
 * Pure: bytes in, bytes out; src/runtime/kv_event_sockets.ts does the I/O.
 */

const FLAG_MORE = 0x01;
const FLAG_LONG = 0x02;
const FLAG_COMMAND = 0x04;
export const GREETING_BYTES = 64;

/** Signature (0xFF, padding, 0x7F), version 3.0, mechanism NULL, not as-server, filler. */
export function greeting(): Uint8Array {
  const out = new Uint8Array(GREETING_BYTES);
  out[0] = 0xff;
  out[8] = 0x01; // the ZMTP 1.0 identity length libzmq also sends, for old peers
  out[9] = 0x7f;
  out[10] = 3;
  out[11] = 0;
  out.set(new TextEncoder().encode("NULL"), 12);
  return out;
}

/** Checks a peer's greeting: ZMTP 3.x with the NULL mechanism; throws otherwise. */
export function checkGreeting(bytes: Uint8Array): void {
  if (bytes.byteLength < GREETING_BYTES || bytes[0] !== 0xff || bytes[9] !== 0x7f) {
    throw new Error("the peer does not speak ZMTP (no ZMTP signature)");
  }
  if (bytes[10] < 3) throw new Error(`the peer speaks ZMTP ${bytes[10]}.x; 3.0 or later needed`);
  const mechanism = new TextDecoder().decode(bytes.subarray(12, 32)).replace(/\0+$/, "");
  if (mechanism !== "NULL") throw new Error(`the peer asks for the ${mechanism} mechanism`);
}

/** The READY command announcing our socket type (`SUB`, `DEALER`). */
export function readyCommand(socketType: string): Uint8Array {
  const encoder = new TextEncoder();
  const name = encoder.encode("READY");
  const key = encoder.encode("Socket-Type");
  const value = encoder.encode(socketType);
  const body = new Uint8Array(1 + name.length + 1 + key.length + 4 + value.length);
  let at = 0;
  body[at++] = name.length;
  body.set(name, at);
  at += name.length;
  body[at++] = key.length;
  body.set(key, at);
  at += key.length;
  new DataView(body.buffer).setUint32(at, value.length);
  body.set(value, at + 4);
  return frame(body, FLAG_COMMAND);
}

/** A multipart message: every frame but the last flagged MORE. */
export function message(parts: readonly Uint8Array[]): Uint8Array {
  const frames = parts.map((part, i) => frame(part, i < parts.length - 1 ? FLAG_MORE : 0));
  const out = new Uint8Array(frames.reduce((n, f) => n + f.length, 0));
  let at = 0;
  for (const f of frames) {
    out.set(f, at);
    at += f.length;
  }
  return out;
}

/** ZMTP 3.0's subscription: a one-frame message of 1 and the topic. */
export function subscription(topic: string): Uint8Array {
  const bytes = new TextEncoder().encode(topic);
  const body = new Uint8Array(1 + bytes.length);
  body[0] = 1;
  body.set(bytes, 1);
  return message([body]);
}

function frame(body: Uint8Array, flags: number): Uint8Array {
  const long = body.length > 255;
  const head = long ? 9 : 2;
  const out = new Uint8Array(head + body.length);
  out[0] = flags | (long ? FLAG_LONG : 0);
  if (long) new DataView(out.buffer).setBigUint64(1, BigInt(body.length));
  else out[1] = body.length;
  out.set(body, head);
  return out;
}

/** What the reader found: a whole multipart message, or a command (by name). */
export type ZmtpItem = { kind: "message"; parts: Uint8Array[] } | { kind: "command"; name: string };

/**
 * Parses the bytes after the greeting into messages and commands, across chunk boundaries.
 * `maxFrameBytes` bounds a frame a peer may announce (a corrupt size would otherwise be waited
 * for, or allocated, in full).
 */
export class ZmtpReader {
  #buffer: Uint8Array = new Uint8Array(0);
  #parts: Uint8Array[] = [];
  readonly #maxFrameBytes: number;

  constructor(maxFrameBytes = 64 * 1024 * 1024) {
    this.#maxFrameBytes = maxFrameBytes;
  }

  /** Adds received bytes; returns the items they complete. Throws on a malformed frame. */
  push(chunk: Uint8Array): ZmtpItem[] {
    this.#buffer = concat(this.#buffer, chunk);
    const items: ZmtpItem[] = [];
    let at = 0;
    for (;;) {
      if (this.#buffer.length - at < 2) break;
      const flags = this.#buffer[at];
      if (flags & ~(FLAG_MORE | FLAG_LONG | FLAG_COMMAND)) {
        throw new Error(`malformed ZMTP frame (flags 0x${flags.toString(16)})`);
      }
      const long = (flags & FLAG_LONG) !== 0;
      const head = long ? 9 : 2;
      if (this.#buffer.length - at < head) break;
      const view = new DataView(this.#buffer.buffer, this.#buffer.byteOffset + at);
      const size = long ? Number(view.getBigUint64(1)) : this.#buffer[at + 1];
      if (size > this.#maxFrameBytes) throw new Error(`a ZMTP frame of ${size} bytes`);
      if (this.#buffer.length - at < head + size) break;
      const body = this.#buffer.slice(at + head, at + head + size);
      at += head + size;
      if (flags & FLAG_COMMAND) {
        items.push({
          kind: "command",
          name: new TextDecoder().decode(body.subarray(1, 1 + body[0])),
        });
        continue;
      }
      this.#parts.push(body);
      if (!(flags & FLAG_MORE)) {
        items.push({ kind: "message", parts: this.#parts });
        this.#parts = [];
      }
    }
    this.#buffer = this.#buffer.slice(at);
    return items;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

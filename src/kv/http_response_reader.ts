/**
 * Reads one HTTP/1.x response from a connection (src/kv/keep_alive_get.ts): the head, then a body
 * framed by `content-length`, chunked encoding or the connection's end, all inside a byte bound.
 */

/** Where a response's head may end; past it the response is refused. */
const MAX_HEAD_BYTES = 64 * 1024;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/;
const latin1 = new TextDecoder("latin1");

export interface ReadResponse {
  status: number;
  statusText: string;
  headers: [string, string][];
  /** Null for a status that has no body (204, 304). */
  body: Uint8Array<ArrayBuffer> | null;
  /** The connection may carry another request: kept alive, body framed, nothing left over. */
  reusable: boolean;
}

interface ResponseHead {
  minor: number;
  status: number;
  statusText: string;
  headers: [string, string][];
}

/** What the reader reads from: a `Deno.Conn`, or a test's scripted bytes. */
export interface ByteSource {
  read(into: Uint8Array): Promise<number | null>;
}

export class HttpResponseReader {
  readonly #conn: ByteSource;
  readonly #maxBytes: number;
  #buffer: Uint8Array<ArrayBuffer> = new Uint8Array(16 * 1024);
  #start = 0;
  #end = 0;

  constructor(conn: ByteSource, maxBytes: number) {
    this.#conn = conn;
    this.#maxBytes = maxBytes;
  }

  /** Reads more bytes; false at the connection's end. */
  async fill(): Promise<boolean> {
    if (this.#end === this.#buffer.length) this.#makeRoom();
    const read = await this.#conn.read(this.#buffer.subarray(this.#end));
    if (read === null) return false;
    this.#end += read;
    return true;
  }

  async read(): Promise<ReadResponse> {
    for (;;) {
      const head = await this.#head();
      if (head.status >= 200 || head.status === 101) return await this.#body(head);
      // 1xx: an interim answer; the final one follows.
    }
  }

  async #head(): Promise<ResponseHead> {
    let end: number;
    while ((end = this.#indexOf("\r\n\r\n")) < 0) {
      if (this.#end - this.#start > MAX_HEAD_BYTES) throw new Error("response head too large");
      if (!(await this.fill())) throw new Error("connection closed before the response's head");
    }
    const lines = latin1.decode(this.#buffer.subarray(this.#start, end)).split("\r\n");
    this.#start = end + 4;
    const statusLine = STATUS_LINE.exec(lines[0]);
    if (!statusLine || Number(statusLine[2]) < 100) {
      throw new Error(`not an HTTP/1.x status line: ${lines[0].slice(0, 80)}`);
    }
    const headers: [string, string][] = [];
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      const name = line.slice(0, colon);
      // RFC 9112 §5.1: no whitespace between a field's name and its colon.
      if (colon <= 0 || /\s/.test(name)) {
        throw new Error(`malformed response header: ${line.slice(0, 80)}`);
      }
      headers.push([name.toLowerCase(), line.slice(colon + 1).trim()]);
    }
    return {
      minor: Number(statusLine[1]),
      status: Number(statusLine[2]),
      statusText: statusLine[3] ?? "",
      headers,
    };
  }

  async #body(head: ResponseHead): Promise<ReadResponse> {
    if (head.status === 101) throw new Error("the server switched protocols");
    const values = (name: string) => head.headers.filter(([n]) => n === name).map(([, v]) => v);
    const connection = values("connection").join(",").toLowerCase();
    let reusable = head.minor === 1
      ? !connection.includes("close")
      : connection.includes("keep-alive");
    let body: Uint8Array<ArrayBuffer> | null;
    const lengths = new Set(values("content-length"));
    if (head.status === 204 || head.status === 205 || head.status === 304) body = null;
    else if (values("transfer-encoding").join(",").toLowerCase().includes("chunked")) {
      body = await this.#chunked();
    } else if (lengths.size > 0) {
      const [length] = lengths;
      if (lengths.size > 1 || !/^\d+$/.test(length)) throw new Error("bad content-length");
      body = await this.#exactly(Number(length));
    } else {
      body = await this.#untilClosed();
      reusable = false;
    }
    const status = head.status;
    return {
      status,
      statusText: head.statusText,
      headers: head.headers,
      body,
      reusable: reusable && this.#start === this.#end,
    };
  }

  async #exactly(length: number): Promise<Uint8Array<ArrayBuffer>> {
    if (length > this.#maxBytes) throw new Error(`response body over ${this.#maxBytes} bytes`);
    while (this.#end - this.#start < length) {
      if (!(await this.fill())) throw new Error("connection closed inside the response's body");
    }
    const bytes = this.#buffer.slice(this.#start, this.#start + length);
    this.#start += length;
    return bytes;
  }

  async #chunked(): Promise<Uint8Array<ArrayBuffer>> {
    const parts: Uint8Array[] = [];
    let total = 0;
    for (;;) {
      const sizeLine = await this.#line();
      const digits = sizeLine.split(";")[0].trim();
      if (!/^[0-9a-fA-F]{1,12}$/.test(digits)) throw new Error(`bad chunk size: ${sizeLine}`);
      const size = Number.parseInt(digits, 16);
      if (size === 0) break;
      total += size;
      if (total > this.#maxBytes) throw new Error(`response body over ${this.#maxBytes} bytes`);
      parts.push(await this.#exactly(size));
      if ((await this.#line()) !== "") throw new Error("chunk not followed by CRLF");
    }
    while ((await this.#line()) !== "") {
      // Trailers: read and dropped.
    }
    const body = new Uint8Array(total);
    let at = 0;
    for (const part of parts) {
      body.set(part, at);
      at += part.length;
    }
    return body;
  }

  async #untilClosed(): Promise<Uint8Array<ArrayBuffer>> {
    while (await this.fill()) {
      if (this.#end - this.#start > this.#maxBytes) {
        throw new Error(`response body over ${this.#maxBytes} bytes`);
      }
    }
    const bytes = this.#buffer.slice(this.#start, this.#end);
    this.#start = this.#end;
    return bytes;
  }

  async #line(): Promise<string> {
    let end: number;
    while ((end = this.#indexOf("\r\n")) < 0) {
      if (this.#end - this.#start > MAX_HEAD_BYTES) throw new Error("response line too long");
      if (!(await this.fill())) throw new Error("connection closed inside a chunked body");
    }
    const line = latin1.decode(this.#buffer.subarray(this.#start, end));
    this.#start = end + 2;
    return line;
  }

  #indexOf(text: "\r\n" | "\r\n\r\n"): number {
    const buffer = this.#buffer;
    const last = this.#end - text.length;
    for (
      let i = buffer.indexOf(13, this.#start);
      i >= 0 && i <= last;
      i = buffer.indexOf(13, i + 1)
    ) {
      if (buffer[i + 1] !== 10) continue;
      if (text.length === 2 || (buffer[i + 2] === 13 && buffer[i + 3] === 10)) return i;
    }
    return -1;
  }

  /**
   * Room to read into: what is left moves to the front, and a full buffer doubles, up to the
   * response's bound.
   */
  #makeRoom(): void {
    const left = this.#buffer.subarray(this.#start, this.#end);
    const cap = this.#maxBytes + MAX_HEAD_BYTES;
    const full = left.length === this.#buffer.length;
    if (full && this.#buffer.length >= cap) {
      throw new Error(`response over ${this.#maxBytes} bytes`);
    }
    const size = full ? Math.min(this.#buffer.length * 2, cap) : this.#buffer.length;
    const next = size === this.#buffer.length ? this.#buffer : new Uint8Array(size);
    next.set(left, 0);
    this.#buffer = next;
    this.#end = left.length;
    this.#start = 0;
  }
}

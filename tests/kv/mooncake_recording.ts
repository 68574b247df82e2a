/**
 * Reads tests/data/mooncake_master_responses.txt: raw HTTP answers of a real `mooncake_master`
 * admin port (docs/compat.md §4), each after a `===== [label] GET <target>` line, plus a few
 * `GET :port/path -> status body` lines captured with curl. Used by the fake master's replay test
 * and by the client-side parser's test.
 */
import { createHash } from "node:crypto";

export interface RecordedCase {
  /** Position in the file, from 0 (curl lines included). */
  index: number;
  /** The `################ ... ################` title above the case ("" before the first). */
  section: string;
  /** The bracketed label, or `curl :port` for a curl line. */
  label: string;
  /** The request target as sent; for synthesized key lists see `keyCount`. */
  target: string;
  /** Set when the recording describes the key list instead of holding it (`<600 distinct ...>`). */
  keyCount?: number;
  /** Length of the request target the recorder sent, when it says (`URL 40222 chars`). */
  urlChars?: number;
  status: number;
  /** `HTTP/1.1 200 OK`; undefined for curl lines. */
  statusLine?: string;
  /** Header lines exactly as recorded, in order; undefined for curl lines. */
  headers?: string[];
  /** The body's bytes, when the recording holds the whole body. */
  body?: Uint8Array;
  /** A long body the recording cut: its first bytes and what the recorder says of the rest. */
  truncated?: { prefix: string; totalBytes: number; entries: number; note: string };
  /** Only a summary was recorded: how many `data` entries the 200 answer held. */
  entries?: number;
}

const RECORDING = new URL("../data/mooncake_master_responses.txt", import.meta.url);

export async function loadRecording(): Promise<RecordedCase[]> {
  return parseRecording(await Deno.readFile(RECORDING));
}

/** Bytes to a string of one char per byte, so that Content-Length slices line up. */
function binary(bytes: Uint8Array): string {
  let text = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    text += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return text;
}

function bytesOf(text: string): Uint8Array {
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

export function parseRecording(bytes: Uint8Array): RecordedCase[] {
  const text = binary(bytes);
  const cases: RecordedCase[] = [];
  let section = "";
  let pos = 0;
  const readLine = () => {
    const end = text.indexOf("\n", pos);
    const stop = end === -1 ? text.length : end;
    const line = text.slice(pos, stop).replace(/\r$/, "");
    pos = end === -1 ? text.length : end + 1;
    return line;
  };
  while (pos < text.length) {
    const line = readLine();
    const title = /^#{8,} (.*) #{8,}$/.exec(line);
    if (title) {
      section = title[1];
      continue;
    }
    const curl = /^GET :(\d+)(\/\S*) -> (\d{3}) (.*)$/.exec(line);
    if (curl) {
      cases.push({
        index: cases.length,
        section,
        label: `curl :${curl[1]}`,
        target: curl[2],
        status: Number(curl[3]),
        body: new TextEncoder().encode(curl[4]),
      });
      continue;
    }
    const head = /^===== \[(.*)\] GET (.*)$/.exec(line);
    if (!head) continue; // the file's first line, NOTE lines, separators
    const item: RecordedCase = {
      index: cases.length,
      section,
      label: head[1],
      target: head[2],
      status: 0,
    };
    const synthesized = /^\/batch_query_keys\?keys=<(\d+) distinct 66-char keys, URL (\d+) chars>$/
      .exec(item.target);
    if (synthesized) {
      item.keyCount = Number(synthesized[1]);
      item.urlChars = Number(synthesized[2]);
    }
    const first = readLine();
    const summary = /^n=(\d+) url=(\d+) chars -> b'(HTTP\/1\.1 (\d{3}) [^']*)' entries (\d+) in /
      .exec(first);
    if (summary) {
      item.statusLine = summary[3];
      item.status = Number(summary[4]);
      item.entries = Number(summary[5]);
      cases.push(item);
      continue;
    }
    const statusLine = /^HTTP\/1\.1 (\d{3}) .*$/.exec(first);
    if (!statusLine) throw new Error(`case ${item.index}: no status line after "${line}"`);
    item.statusLine = first;
    item.status = Number(statusLine[1]);
    item.headers = [];
    for (let header = readLine(); header !== ""; header = readLine()) item.headers.push(header);
    const length = Number(
      item.headers.find((h) => /^content-length:/i.test(h))?.split(":")[1] ?? "NaN",
    );
    if (!Number.isInteger(length)) throw new Error(`case ${item.index}: no Content-Length`);
    const bodyLineEnd = text.indexOf("\n", pos);
    const bodyLine = text.slice(pos, bodyLineEnd === -1 ? text.length : bodyLineEnd);
    const cut = /^(.*)\.\.\.<(\d+) bytes total, (\d+) entries, (.*)>$/.exec(bodyLine);
    if (cut) {
      item.truncated = {
        prefix: cut[1],
        totalBytes: Number(cut[2]),
        entries: Number(cut[3]),
        note: cut[4],
      };
      pos = bodyLineEnd + 1;
    } else {
      item.body = bytesOf(text.slice(pos, pos + length));
      pos += length;
      if (pos < text.length && text[pos] !== "\n") {
        throw new Error(`case ${item.index}: the body does not end where Content-Length says`);
      }
    }
    cases.push(item);
  }
  return cases;
}

/**
 * The keys behind `<N distinct 66-char keys>`: `sha256(str(i)).hexdigest() + "_0"` for i < N (the
 * recorded 600-key answer starts with exactly these, sorted).
 */
export function syntheticKeys(count: number): string[] {
  return Array.from(
    { length: count },
    (_, i) => `${createHash("sha256").update(String(i)).digest("hex")}_0`,
  );
}

/** The request target a case sent. */
export function targetOf(item: RecordedCase): string {
  if (item.keyCount === undefined) return item.target;
  return `/batch_query_keys?keys=${syntheticKeys(item.keyCount).join(",")}`;
}

export function textOf(bytes: Uint8Array | undefined): string {
  return new TextDecoder().decode(bytes ?? new Uint8Array());
}

/** The path of a target, without its query. */
export function pathOf(target: string): string {
  const q = target.indexOf("?");
  return q === -1 ? target : target.slice(0, q);
}

/**
 * Replays every request of tests/data/mooncake_master_responses.txt (a real `mooncake_master`,
 * docs/compat.md §4) against the fake master, with the fake's state set from the recording, and
 * compares the raw answers: status line, header lines (in order; the Date value only by format),
 * and the body byte for byte. Two bodies are not deterministic on the real master and are compared
 * by content instead: `/get_all_keys` lists keys in the master's hash-map order, and
 * `/metrics/summary` carries request rates per second.
 */
import { ok, strictEqual } from "node:assert/strict";
import {
  type FakeMooncakeMaster,
  startFakeMooncakeMaster,
} from "../../src/fakes/fake_mooncake_master.ts";
import {
  loadRecording,
  pathOf,
  type RecordedCase,
  syntheticKeys,
  targetOf,
  textOf,
} from "./mooncake_recording.ts";

interface RawAnswer {
  statusLine: string;
  headers: string[];
  body: Uint8Array;
}

/** One HTTP/1.1 GET over a plain socket: the target goes out byte for byte, however long. */
async function rawGet(port: number, target: string): Promise<RawAnswer> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    const request = `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: */*\r\n\r\n`;
    const bytes = Uint8Array.from(request, (c) => c.charCodeAt(0));
    for (let written = 0; written < bytes.length;) {
      written += await conn.write(bytes.subarray(written));
    }
    let buffer = new Uint8Array(0);
    const chunk = new Uint8Array(65536);
    const more = async () => {
      const n = await conn.read(chunk);
      if (n === null) return false;
      const next = new Uint8Array(buffer.length + n);
      next.set(buffer);
      next.set(chunk.subarray(0, n), buffer.length);
      buffer = next;
      return true;
    };
    let headEnd = -1;
    while ((headEnd = indexOfBlankLine(buffer)) === -1) {
      if (!await more()) throw new Error(`connection closed before the head of ${target}`);
    }
    const lines = new TextDecoder().decode(buffer.subarray(0, headEnd)).split("\r\n");
    const statusLine = lines.shift()!;
    const lengthLine = lines.find((h) => /^content-length:/i.test(h));
    const length = lengthLine === undefined ? undefined : Number(lengthLine.split(":")[1]);
    const bodyStart = headEnd + 4;
    if (length === undefined) { while (await more()); }
    else {
      while (buffer.length < bodyStart + length) {
        if (!await more()) throw new Error(`connection closed inside the body of ${target}`);
      }
    }
    const body = buffer.slice(bodyStart, length === undefined ? undefined : bodyStart + length);
    return { statusLine, headers: lines, body };
  } finally {
    conn.close();
  }
}

function indexOfBlankLine(bytes: Uint8Array): number {
  for (let i = 0; i + 3 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 && bytes[i + 3] === 10) {
      return i;
    }
  }
  return -1;
}

const DATE = /^Date: [A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const RATE = /\d+\.\d{2}\b/g;

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

function show(bytes: Uint8Array, max = 300): string {
  const text = textOf(bytes);
  return JSON.stringify(text.length > max ? `${text.slice(0, max)}…` : text);
}

/** Every way the fake's answer differs from the recorded one; empty when it matches. */
function differences(item: RecordedCase, answer: RawAnswer): string[] {
  const problems: string[] = [];
  const path = pathOf(item.target);
  const text = textOf(answer.body);
  const actualLength = answer.headers.find((h) => /^content-length:/i.test(h));
  const lengthProblem = actualLength === `Content-Length: ${answer.body.length}`
    ? undefined
    : `"${actualLength}" for a body of ${answer.body.length} bytes`;

  if (item.entries !== undefined) {
    // Only a summary was recorded (2,000+ keys): its status line and one entry per distinct key.
    if (answer.statusLine !== item.statusLine) {
      problems.push(`status line "${answer.statusLine}", recorded "${item.statusLine}"`);
    }
    if (lengthProblem) problems.push(lengthProblem);
    let entries = -1;
    try {
      entries = Object.keys(JSON.parse(text).data).length;
    } catch {
      problems.push(`body is not JSON: ${show(answer.body, 120)}`);
    }
    if (entries !== item.entries) problems.push(`${entries} entries, recorded ${item.entries}`);
    return problems;
  }

  if (item.headers === undefined) {
    // A curl line: status and body only.
    const status = Number(answer.statusLine.split(" ")[1]);
    if (status !== item.status) problems.push(`status ${status}, recorded ${item.status}`);
    if (!equalBytes(answer.body, item.body!)) {
      problems.push(`body ${show(answer.body)}, recorded ${show(item.body!)}`);
    }
    return problems;
  }

  if (answer.statusLine !== item.statusLine) {
    problems.push(`status line "${answer.statusLine}", recorded "${item.statusLine}"`);
  }
  if (lengthProblem) problems.push(lengthProblem);

  const nondeterministicBody = path === "/metrics/summary";
  const expectedHeaders = item.headers.map((h) =>
    nondeterministicBody && /^Content-Length:/.test(h) ? "Content-Length: <rates>" : h
  );
  const actualHeaders = answer.headers.map((h) => {
    if (DATE.test(h)) return "Date: <date>";
    return nondeterministicBody && /^Content-Length:/.test(h) ? "Content-Length: <rates>" : h;
  });
  const recordedHeaders = expectedHeaders.map((h) => (h.startsWith("Date: ") ? "Date: <date>" : h));
  if (JSON.stringify(actualHeaders) !== JSON.stringify(recordedHeaders)) {
    problems.push(
      `headers ${JSON.stringify(actualHeaders)}, recorded ${JSON.stringify(recordedHeaders)}`,
    );
  }

  if (item.truncated !== undefined) {
    const { prefix, totalBytes, entries, note } = item.truncated;
    if (!text.startsWith(prefix)) problems.push(`body does not start with the recorded prefix`);
    if (answer.body.length !== totalBytes) {
      problems.push(`${answer.body.length} body bytes, recorded ${totalBytes}`);
    }
    try {
      const data = Object.values(JSON.parse(text).data) as { ok: boolean; error: string }[];
      if (data.length !== entries) problems.push(`${data.length} entries, recorded ${entries}`);
      const error = /^every one (\S+)$/.exec(note)?.[1];
      if (error && !data.every((e) => e.ok === false && e.error === error)) {
        problems.push(`not every entry is ${error}`);
      }
    } catch {
      problems.push(`body is not JSON: ${show(answer.body, 120)}`);
    }
    return problems;
  }

  const recorded = item.body!;
  if (path === "/get_all_keys" && item.status === 200) {
    // Hash-map order on the real master: compare the lines, not their order.
    const lines = (t: string) => t.split("\n").sort().join("\n");
    if (lines(text) !== lines(textOf(recorded))) {
      problems.push(`keys ${show(answer.body)}, recorded ${show(recorded)}`);
    }
  } else if (nondeterministicBody) {
    if (text.replace(RATE, "<rate>") !== textOf(recorded).replace(RATE, "<rate>")) {
      problems.push(`summary ${show(answer.body, 2000)}, recorded ${show(recorded, 2000)}`);
    }
  } else if (!equalBytes(answer.body, recorded)) {
    problems.push(`body ${show(answer.body)}, recorded ${show(recorded)}`);
  }
  return problems;
}

/** Consecutive cases answered by one master in one state. */
function sceneOf(item: RecordedCase, ordinal: number): string {
  if (item.label === "client --host=::1") {
    // Two client runs: a segment without the key, then another client that wrote it.
    return `${item.section}|${item.label}|${Math.floor(ordinal / 2)}`;
  }
  if (item.label.startsWith("special-char keys")) return `${item.section}|special-char keys`;
  return `${item.section}|${item.label}`;
}

interface Descriptor {
  size_: number;
  buffer_address_: number;
  transport_endpoint_: string;
}

interface SegmentDetail {
  segment_name: string;
  segment_id: string;
  client_id: string;
  base_address: string;
  size_bytes: number;
  protocol: string;
}

const json = (bytes: Uint8Array | undefined): unknown => {
  try {
    return JSON.parse(textOf(bytes));
  } catch {
    return undefined;
  }
};

/**
 * Puts into the fake what the scene's answers show of the real master's state: mode (HA standby,
 * metadata port), observed leader, mounted segments, and every key with its replicas.
 */
async function setUp(master: FakeMooncakeMaster, scene: RecordedCase[]): Promise<void> {
  const segments = new Map<string, SegmentDetail>();
  const placed = new Map<string, Descriptor[]>();
  const listed: string[] = [];
  let standby = false;
  let leader: { address: string; viewVersion: number } | undefined;
  for (const item of scene) {
    const path = pathOf(item.target);
    const body = json(item.body) as Record<string, unknown> | undefined;
    if (item.status === 503 && body?.error_message === "service plane is not active") {
      standby = true;
    }
    if ((path === "/health" || path === "/leader") && typeof body?.leader_address === "string") {
      leader = { address: body.leader_address, viewVersion: Number(body.view_version) };
    }
    if (path === "/health" && body?.service_ready === false) standby = true;
    if (path === "/get_segments_detail" && item.status === 200) {
      for (const segment of body!.segments as SegmentDetail[]) {
        segments.set(segment.segment_name, segment);
      }
    }
    if (path === "/batch_query_keys" && item.status === 200 && body !== undefined) {
      const data = body.data as Record<string, { ok: boolean; values: Descriptor[] | null }>;
      for (const [key, entry] of Object.entries(data)) {
        if (entry.ok && entry.values) placed.set(key, entry.values);
      }
    }
    if (path === "/query_key" && item.status === 200) {
      // /query_key reads its key raw: the target holds the key exactly.
      placed.set(item.target.slice("/query_key?key=".length), body!.data as Descriptor[]);
    }
    if (path === "/get_all_keys" && item.status === 200) {
      listed.push(...textOf(item.body).split("\n").filter((line) => line !== ""));
    }
  }

  if (scene[0].label.startsWith("misconfig")) await master.setMode("metadata_port");
  else if (standby) await master.setMode("standby503");
  master.setLeader(leader);

  const descriptors = [...placed.values()].flat();
  for (const [name, segment] of segments) {
    master.mountSegment(name, {
      segmentId: segment.segment_id,
      clientId: segment.client_id,
      baseAddress: Number(BigInt(segment.base_address)),
      size: segment.size_bytes,
      protocol: segment.protocol,
    });
  }
  for (const name of new Set(descriptors.map((d) => d.transport_endpoint_))) {
    if (segments.has(name)) continue;
    // In no recorded detail: the segment starts at its lowest buffer, 16 MiB aligned (as every
    // recorded segment base is); its size is not recorded.
    const lowest = Math.min(
      ...descriptors.filter((d) => d.transport_endpoint_ === name).map((d) => d.buffer_address_),
    );
    master.mountSegment(name, { baseAddress: lowest - (lowest % 0x1000000), size: 64 << 20 });
  }

  // Keys with a known buffer first, by address (the order the client wrote them), then the keys
  // only /get_all_keys shows, with the scene's usual size, wherever the allocator puts them.
  const known = [...placed].flatMap(([key, values]) => values.map((value) => ({ key, value })))
    .sort((a, b) => a.value.buffer_address_ - b.value.buffer_address_);
  for (const { key, value } of known) {
    master.put(key, value.transport_endpoint_, {
      size: value.size_,
      address: value.buffer_address_,
    });
  }
  const size = descriptors[0]?.size_;
  const endpoint = descriptors[0]?.transport_endpoint_ ?? [...segments.keys()][0];
  for (const key of listed) {
    if (!placed.has(key)) master.put(key, endpoint, { size });
  }
}

Deno.test("the fake master answers every recorded request exactly as the real master did", async (t) => {
  const cases = await loadRecording();
  strictEqual(cases.length, 79, "75 raw answers and 4 curl lines");

  const scenes: RecordedCase[][] = [];
  const ordinals = new Map<string, number>();
  let last = "";
  for (const item of cases) {
    const ordinal = ordinals.get(item.label) ?? 0;
    ordinals.set(item.label, ordinal + 1);
    const scene = sceneOf(item, ordinal);
    if (scene !== last) scenes.push([]);
    scenes[scenes.length - 1].push(item);
    last = scene;
  }

  // Sanity of the synthesized key lists: they are the ones the recorder sent.
  for (const item of cases.filter((c) => c.keyCount !== undefined)) {
    strictEqual(targetOf(item).length, item.urlChars, `case ${item.index}: URL length`);
  }
  ok(syntheticKeys(600).sort()[0].startsWith("00328ce57bbc14b3"));

  let replayed = 0;
  let failed = 0;
  for (const scene of scenes) {
    const master = await startFakeMooncakeMaster();
    try {
      await setUp(master, scene);
      for (const item of scene) {
        const name = `#${item.index} [${item.label}] GET ${item.target.slice(0, 90)}`;
        const passed = await t.step(name, async () => {
          const answer = await rawGet(master.port, targetOf(item));
          const problems = differences(item, answer);
          ok(problems.length === 0, problems.join("\n"));
        });
        replayed++;
        if (!passed) failed++;
      }
    } finally {
      await master.close();
    }
  }
  strictEqual(replayed, cases.length, "every recorded case was replayed");
  strictEqual(failed, 0, `${failed} of ${replayed} recorded cases differ`);
});

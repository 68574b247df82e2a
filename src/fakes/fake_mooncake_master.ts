/**
 * A Mooncake master's admin HTTP port (docs/compat.md §4) on 127.0.0.1, for tests and the demo's
 * embedded cluster. In `ok` mode it answers byte for byte like a real `mooncake_master` (Mooncake
 * 3b5a5941, its cinatra HTTP server and struct_json writer), as recorded in
 * tests/data/mooncake_master_responses.txt and checked by tests/kv/fake_mooncake_master_replay_test.ts:
 *
 * - HTTP: its own HTTP/1.1 server (not `Deno.serve`, which resets request lines over 64 KiB;
 *   the real master reads 20,000-key URLs of 1.3 MB). Every answer carries `Server: cinatra`,
 *   `Content-Length`, `Date`, then `Content-Type` when the handler sets one. Unknown paths and
 *   methods other than GET get cinatra's `404 Not Found` (no Content-Type); a path with `%` is
 *   percent-decoded before routing; a request that is not HTTP gets 400 `invalid http protocol`.
 * - `/batch_query_keys`: the first `keys=` value, percent-decoded once by cinatra (`+` is a
 *   space; a malformed or cut `%` escape becomes `?` and ends the value, dropping the rest of the
 *   key list), split on every comma (empty keys kept). No keys: 400
 *   `{"success":false,"error":"No keys provided. Use ?keys=key1,key2,..."}`. Otherwise `data` is
 *   a map sorted by key bytes, one entry per distinct key, every field written: absent or
 *   not-ready keys `{"ok":false,"error":"OBJECT_NOT_FOUND"|"REPLICA_IS_NOT_READY","values":null,
 *   "disk_values":null,"local_disk_values":null,"nof_values":null}`, present keys `"ok":true,
 *   "error":null,"values":[...]` (memory replicas, maybe `[]`) and the other lists `null` unless
 *   they hold a replica. Strings are escaped the struct_json way (non-ASCII as `\u00E9`); a key
 *   that is not UTF-8 once decoded makes the writer throw: 503 `503 Service Unavailable`.
 * - `/query_key?key=` reads its key raw (no decoding): 200 `{"success":true,"data":[...]}` or 404
 *   `{"success":false,"error_code":-704,"error_message":"OBJECT_NOT_FOUND"}`.
 * - `/health`, `/leader`, `/role`, `/ha_status`, `/metrics`, `/metrics/summary` answer in every
 *   mode; the others need an active service plane, else (HA standby) 503
 *   `{"success":false,"error_code":-1011,"error_message":"service plane is not active"}`.
 * - Segments are mounted (explicitly, or on the first memory `put` on an endpoint) with a base
 *   address, a size and `u64-u64` segment / client ids; each memory replica gets its own buffer in
 *   its segment, first fit from the base, as the real allocator placed the recorded ones.
 *
 * Modes:
 * - `ok`: the real master above.
 * - `old_version`: v0.3.9-0.3.11 — keys taken raw, hand-written JSON in request order (duplicates
 *   kept), memory replicas only, `{"ok":false,"error":"OBJECT_NOT_FOUND"}`, `/health` plain `OK`.
 * - `slow`: `ok` after `delayMs` (default 200 ms) on `/batch_query_keys`.
 * - `down`: the listener is closed (connection refused); any other mode re-opens the same port.
 * - `standby503`: an HA standby (role and ha_state `standby`, service not ready): 503 on
 *   `/batch_query_keys` and every other service route; `/health` and `/leader` show the leader set
 *   with `setLeader` (real standbys know it).
 *
 * HA groups: `shareStoreWith` makes a master hold the same objects and segments as another (the
 * real standby replays the leader's metadata), so a promoted standby answers what the old leader
 * knew; `demote()` / `promote()` switch between `standby503` and `ok` (the leader, serving).
 * - `metadata_port`: the URL points at the master's HTTP metadata server
 *   (`--http_metadata_server_port`, default 8080) instead of its admin port: cinatra's plain
 *   `404 Not Found` for every admin path.
 * - `garbage`: 200 with a body that is not JSON. `http500`: 500 with a plain body.
 *
 * Out-of-process writers (fake engines) can use `POST /_fake/put`, `/_fake/remove`, `/_fake/clear`
 * with JSON bodies (`{"key"|"keys", "endpoint", "tier", "ready", "size"}`), and read
 * `GET /_fake/state`. These answer in every mode but `down`.
 */

export type FakeMasterMode =
  | "ok"
  | "slow"
  | "down"
  | "standby503"
  | "garbage"
  | "old_version"
  | "http500"
  | "metadata_port";

export type ReplicaTier = "memory" | "local_disk" | "shared_disk";

export interface PutOptions {
  /** Where the replica lives (default memory, on `endpoint`). Shared disk ignores the endpoint. */
  tier?: ReplicaTier;
  /** False: the key is still being written (REPLICA_IS_NOT_READY). Default true. */
  ready?: boolean;
  /** Object size in bytes (default 1 MiB). */
  size?: number;
  /**
   * Memory tier only: the replica's `buffer_address_` (e.g. one read from a recorded answer).
   * Default: the lowest free place in the endpoint's segment.
   */
  address?: number;
}

export interface SegmentOptions {
  /** Virtual address of the segment's first byte (`base_address`). */
  baseAddress?: number;
  /** Bytes (`size_bytes`, default 16 GiB). */
  size?: number;
  /** `u64-u64`, as the master prints UUIDs (default derived from the name). */
  segmentId?: string;
  /** `u64-u64` of the client that mounted it (default derived from the name). */
  clientId?: string;
  /** Transfer protocol of its buffers (default `tcp`). */
  protocol?: string;
}

/** The HA leader a master has observed (`/health`'s `leader_address` and `view_version`). */
export interface LeaderView {
  /** The leader's RPC address, e.g. `10.0.0.1:50051`. */
  address: string;
  viewVersion: number;
}

export interface FakeMasterRequest {
  /** The query string exactly as received, without the leading `?`. */
  rawQuery: string;
  /** The keys as this mode's master reads them (decoded or raw). */
  keys: string[];
  mode: FakeMasterMode;
  /** `performance.now()` when the request arrived. */
  at: number;
}

/** What an HA group's masters share: the stored objects and the mounted segments. */
export interface FakeMasterStore {
  readonly objects: Map<string, StoredObject>;
  readonly segments: Map<string, Segment>;
  autoMounted: number;
}

export interface FakeMasterOptions {
  mode?: FakeMasterMode;
  /** Another master of the same HA group: both read and write one store. */
  shareStoreWith?: FakeMooncakeMaster;
  delayMs?: number;
  /** Port to bind (default 0: any free port). */
  port?: number;
  /** An HA master's observed leader (default none: `null` fields, as a master without HA). */
  leader?: LeaderView;
  /** `/batch_query_keys` requests kept in `requests`, the latest (default 10 000; a soak sends more). */
  maxLoggedRequests?: number;
}

export interface FakeMooncakeMaster {
  readonly url: string;
  readonly port: number;
  readonly mode: FakeMasterMode;
  put(key: string, endpoint: string, options?: PutOptions): void;
  remove(key: string): void;
  /** Removes every key; mounted segments stay. */
  clear(): void;
  /** Mounts (or re-describes) a segment; `put` mounts one with defaults when needed. */
  mountSegment(name: string, options?: SegmentOptions): void;
  /** Unmounts a segment and drops the memory replicas it held. */
  unmountSegment(name: string): void;
  /** The HA leader `/health` and `/leader` report; undefined for none. */
  setLeader(leader: LeaderView | undefined): void;
  /** Switch behaviour; `down` closes the listener, leaving `down` re-opens it on the same port. */
  setMode(mode: FakeMasterMode): Promise<void>;
  /** HA: become a standby (`standby503`): data routes answer 503 -1011, `/health` says so. */
  demote(): Promise<void>;
  /** HA: become the serving leader (`ok`), optionally with the leader view `/health` reports. */
  promote(leader?: LeaderView): Promise<void>;
  /** The objects and segments, shared with the masters of its HA group. */
  readonly store: FakeMasterStore;
  setDelayMs(ms: number): void;
  /** The latest `/batch_query_keys` requests (up to `maxLoggedRequests`), oldest first. */
  readonly requests: readonly FakeMasterRequest[];
  /** Number of `/batch_query_keys` requests received (since the last resetLog()). */
  readonly count: number;
  /** Most `/batch_query_keys` requests being answered at the same time. */
  readonly maxInFlight: number;
  /** Forget the request log and the in-flight maximum. */
  resetLog(): void;
  close(): Promise<void>;
}

interface MemoryReplica {
  size: number;
  address: number;
}

interface StoredObject {
  ready: boolean;
  memory: Map<string, MemoryReplica>;
  localDisk: Map<string, number>;
  sharedDiskSize: number | undefined;
}

interface Segment {
  name: string;
  baseAddress: number;
  size: number;
  segmentId: string;
  clientId: string;
  protocol: string;
  /** Buffers in use, by offset from the base. */
  used: { offset: number; size: number }[];
}

interface Reply {
  status: number;
  body: string | Uint8Array;
  /** Content-Type; cinatra writes none unless the handler adds it. */
  type?: string;
}

const JSON_TYPE = "application/json; charset=utf-8";
const METRICS_TYPE = "text/plain; version=0.0.4";
const PLAIN_TYPE = "text/plain; charset=utf-8";
const DEFAULT_SIZE = 1 << 20;
const DEFAULT_SEGMENT_SIZE = 16 * 1024 ** 3;
/** Base of the first segment `put` mounts; later ones sit 64 GiB lower each. */
const BASE_ADDRESS = 140231004368896;
const SEGMENT_STRIDE = 64 * 1024 ** 3;
/** Past this, a request head is refused (the real master has no limit; this is a test fake). */
const MAX_HEAD_BYTES = 64 << 20;
const NOT_ACTIVE =
  `{"success":false,"error_code":-1011,"error_message":"service plane is not active"}`;
const NO_KEYS = `{"success":false,"error":"No keys provided. Use ?keys=key1,key2,..."}`;
const REASONS: Record<number, string> = {
  200: "OK",
  400: "Bad Request",
  404: "Not Found",
  405: "Method Not Allowed",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

const encoder = new TextEncoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
const lenientUtf8 = new TextDecoder();

/** Starts listening on 127.0.0.1 (a free port unless `port` is given) before it resolves. */
export function startFakeMooncakeMaster(
  options: FakeMasterOptions = {},
): Promise<FakeMooncakeMaster> {
  const store: FakeMasterStore = options.shareStoreWith?.store ??
    { objects: new Map(), segments: new Map(), autoMounted: 0 };
  const { objects, segments } = store;
  const requests: FakeMasterRequest[] = [];
  const pendingDelays = new Set<AbortController>();
  const connections = new Set<Connection>();
  let mode: FakeMasterMode = options.mode ?? "ok";
  let leader: LeaderView | undefined = options.leader;
  let delayMs = options.delayMs ?? 200;
  let inFlight = 0;
  let maxInFlight = 0;
  let received = 0;
  const maxLogged = options.maxLoggedRequests ?? 10_000;
  /** Logs a request, dropping the oldest beyond `maxLogged` (the log of a long run stays bounded). */
  const logRequest = (request: FakeMasterRequest) => {
    received++;
    requests.push(request);
    if (requests.length > maxLogged) requests.splice(0, requests.length - maxLogged);
  };
  let listener: Deno.TcpListener | undefined;
  let accepting: Promise<void> | undefined;
  let port = options.port ?? 0;
  let closed = false;

  const mountSegment = (name: string, segmentOptions: SegmentOptions = {}) => {
    const existing = segments.get(name);
    const segment: Segment = existing ?? {
      name,
      baseAddress: BASE_ADDRESS - SEGMENT_STRIDE * store.autoMounted++,
      size: DEFAULT_SEGMENT_SIZE,
      segmentId: uuidOf(name, 1),
      clientId: clientIdOf(name),
      protocol: "tcp",
      used: [],
    };
    if (segmentOptions.baseAddress !== undefined) {
      // Keep every buffer's address: re-basing moves the offsets instead.
      const shift = segment.baseAddress - segmentOptions.baseAddress;
      for (const buffer of segment.used) buffer.offset += shift;
      segment.baseAddress = segmentOptions.baseAddress;
    }
    segment.size = segmentOptions.size ?? segment.size;
    segment.segmentId = segmentOptions.segmentId ?? segment.segmentId;
    segment.clientId = segmentOptions.clientId ?? segment.clientId;
    segment.protocol = segmentOptions.protocol ?? segment.protocol;
    segments.set(name, segment);
  };

  const releaseReplica = (endpoint: string, replica: MemoryReplica) => {
    const segment = segments.get(endpoint);
    if (segment === undefined) return;
    const offset = replica.address - segment.baseAddress;
    const i = segment.used.findIndex((buffer) => buffer.offset === offset);
    if (i !== -1) segment.used.splice(i, 1);
  };

  const releaseObject = (object: StoredObject) => {
    for (const [endpoint, replica] of object.memory) releaseReplica(endpoint, replica);
  };

  const put = (key: string, endpoint: string, putOptions: PutOptions = {}) => {
    const object = objects.get(key) ??
      { ready: true, memory: new Map(), localDisk: new Map(), sharedDiskSize: undefined };
    const size = putOptions.size ?? DEFAULT_SIZE;
    const tier = putOptions.tier ?? "memory";
    if (tier === "memory") {
      if (!segments.has(endpoint)) mountSegment(endpoint);
      const segment = segments.get(endpoint)!;
      const previous = object.memory.get(endpoint);
      const moved = putOptions.address !== undefined && putOptions.address !== previous?.address;
      if (previous === undefined || previous.size !== size || moved) {
        if (previous !== undefined) releaseReplica(endpoint, previous);
        object.memory.set(endpoint, { size, address: allocate(segment, size, putOptions.address) });
      }
    } else if (tier === "local_disk") object.localDisk.set(endpoint, size);
    else object.sharedDiskSize = size;
    object.ready = putOptions.ready ?? true;
    objects.set(key, object);
  };

  const remove = (key: string) => {
    const object = objects.get(key);
    if (object !== undefined) releaseObject(object);
    objects.delete(key);
  };

  const clear = () => {
    for (const object of objects.values()) releaseObject(object);
    objects.clear();
  };

  // Not tied to the client's connection: a delay whose client gave up runs to its end, and
  // `down` / `close()` cut every delay short (and skip those that start while they stop).
  const delay = (ms: number) =>
    new Promise<void>((resolve) => {
      if (listener === undefined) return resolve();
      const controller = new AbortController();
      const done = () => {
        clearTimeout(timer);
        pendingDelays.delete(controller);
        resolve();
      };
      const timer = setTimeout(done, ms);
      pendingDelays.add(controller);
      controller.signal.addEventListener("abort", done, { once: true });
    });

  const cancelDelays = () => {
    for (const controller of [...pendingDelays]) controller.abort();
  };

  const serving = () => mode !== "standby503";

  const batchQueryKeys = async (query: Map<string, string>, rawQuery: string): Promise<Reply> => {
    const current = mode;
    const raw = query.get("keys") ?? "";
    const oldVersion = current === "old_version";
    const decoded = oldVersion ? encodeBinary(raw) : cinatraUrlDecode(raw);
    const keyBytes = oldVersion ? getlineSplit(decoded) : commaSplit(decoded);
    logRequest({
      rawQuery,
      keys: keyBytes.map((bytes) => lenientUtf8.decode(bytes)),
      mode: current,
      at: performance.now(),
    });
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      if (current === "slow") await delay(delayMs);
      switch (current) {
        case "standby503":
          return jsonReply(503, NOT_ACTIVE);
        case "garbage":
          return jsonReply(200, `{"success":true,"data":{"<html>oops`);
        case "http500":
          return { status: 500, body: "Internal Server Error" };
      }
      if (keyBytes.length === 0) return jsonReply(400, NO_KEYS);
      if (oldVersion) {
        return jsonReply(200, oldBody(keyBytes.map((b) => lenientUtf8.decode(b)), objects));
      }
      const keys: string[] = [];
      for (const bytes of keyBytes) {
        const key = utf8OrUndefined(bytes);
        // struct_json throws on it; cinatra answers an exception with a bare 503.
        if (key === undefined) return defaultReply(503);
        keys.push(key);
      }
      return jsonReply(200, newBody(keys, objects, segments));
    } finally {
      inFlight--;
    }
  };

  const queryKey = (query: Map<string, string>): Reply => {
    // get_query_value: the raw text, no decoding.
    const key = utf8OrUndefined(encodeBinary(query.get("key") ?? ""));
    const object = key === undefined ? undefined : objects.get(key);
    if (object === undefined || !readable(object)) {
      const [code, name] = object === undefined
        ? [-704, "OBJECT_NOT_FOUND"]
        : [-703, "REPLICA_IS_NOT_READY"];
      return jsonReply(404, `{"success":false,"error_code":${code},"error_message":"${name}"}`);
    }
    return jsonReply(200, `{"success":true,"data":[${memoryDescriptors(object, segments)}]}`);
  };

  const role = () => (serving() ? "leader" : "standby");
  const haState = () => (serving() ? "serving" : "standby");

  const adminRoute = async (
    path: string,
    query: Map<string, string>,
    rawQuery: string,
  ): Promise<Reply | undefined> => {
    if (mode === "metadata_port") {
      if (path === "/batch_query_keys") {
        logRequest({ rawQuery, keys: [], mode, at: performance.now() });
      }
      return undefined;
    }
    if (path === "/batch_query_keys") return await batchQueryKeys(query, rawQuery);
    switch (path) {
      case "/health":
        if (mode === "old_version") return { status: 200, body: "OK", type: METRICS_TYPE };
        return jsonReply(
          200,
          `{"status":"ok","role":"${role()}","ha_state":"${haState()}",` +
            `"service_ready":${serving()},${leaderFields(leader)}}`,
        );
      case "/leader":
        return jsonReply(200, `{"present":${leader !== undefined},${leaderFields(leader)}}`);
      case "/role":
        return { status: 200, body: role(), type: PLAIN_TYPE };
      case "/ha_status":
        return { status: 200, body: haState(), type: PLAIN_TYPE };
      case "/metrics":
        return { status: 200, body: metrics(objects, received), type: METRICS_TYPE };
      case "/metrics/summary":
        return {
          status: 200,
          body: metricsSummary(role(), haState(), serving(), leader, objects, segments),
          type: METRICS_TYPE,
        };
      case "/query_key":
      case "/get_all_keys":
      case "/get_all_segments":
      case "/get_segments_detail":
        if (!serving()) return jsonReply(503, NOT_ACTIVE);
    }
    switch (path) {
      case "/query_key":
        return queryKey(query);
      case "/get_all_keys":
        return { status: 200, body: linesOf(objects.keys()), type: METRICS_TYPE };
      case "/get_all_segments":
        return { status: 200, body: linesOf(segments.keys()), type: METRICS_TYPE };
      case "/get_segments_detail":
        return jsonReply(200, segmentsDetail(segments));
    }
    return undefined;
  };

  const fakeRoute = (request: ParsedRequest, path: string): Reply => {
    if (path === "/_fake/state") {
      return jsonReply(
        200,
        JSON.stringify({ mode, count: received, keys: [...objects.keys()] }),
      );
    }
    if (request.method !== "POST") return { status: 405, body: "use POST" };
    let body: Record<string, unknown> = {};
    try {
      const text = strictUtf8.decode(request.body);
      if (text !== "") body = JSON.parse(text);
    } catch {
      return jsonReply(400, `{"success":false,"error":"body is not JSON"}`);
    }
    const keys = Array.isArray(body.keys)
      ? body.keys.map(String)
      : typeof body.key === "string"
      ? [body.key]
      : [];
    if (path === "/_fake/clear") clear();
    else if (path === "/_fake/remove") { for (const key of keys) remove(key); }
    else if (path === "/_fake/put") {
      const endpoint = typeof body.endpoint === "string" ? body.endpoint : "";
      for (const key of keys) {
        put(key, endpoint, {
          tier: body.tier as ReplicaTier | undefined,
          ready: typeof body.ready === "boolean" ? body.ready : undefined,
          size: typeof body.size === "number" ? body.size : undefined,
        });
      }
    } else return { status: 404, body: "not found" };
    return jsonReply(200, JSON.stringify({ success: true, keys: keys.length }));
  };

  const route = async (request: ParsedRequest): Promise<Reply> => {
    const q = request.target.indexOf("?");
    const rawPath = q === -1 ? request.target : request.target.slice(0, q);
    const rawQuery = q === -1 ? "" : request.target.slice(q + 1);
    if (rawPath.startsWith("/_fake/")) return fakeRoute(request, rawPath);
    // cinatra routes on "METHOD path", percent-decoded when the path holds a `%`.
    const path = rawPath.includes("%") ? binaryOf(cinatraUrlDecode(rawPath)) : rawPath;
    if (request.method !== "GET") return defaultReply(404);
    try {
      return await adminRoute(path, parseQuery(rawQuery), rawQuery) ?? defaultReply(404);
    } catch (error) {
      // cinatra answers a handler's exception (struct_json refusing a string that is not UTF-8)
      // with a bare 503.
      if (error instanceof NotUtf8) return defaultReply(503);
      throw error;
    }
  };

  const serveConnection = async (connection: Connection) => {
    try {
      while (!connection.closing) {
        connection.idle = true;
        const request = await readRequest(connection);
        connection.idle = false;
        if (request === undefined) break;
        if ("invalid" in request) {
          await connection.write(encodeReply({ status: 400, body: request.invalid }, false));
          break;
        }
        const reply = await route(request);
        await connection.write(encodeReply(reply, request.method === "HEAD"));
        if (request.close) break;
      }
    } catch {
      // The client went away (or `down` closed the socket): nothing left to answer.
    } finally {
      connection.close();
      connections.delete(connection);
    }
  };

  const acceptLoop = async (server: Deno.TcpListener) => {
    try {
      for await (const conn of server) {
        const connection = new Connection(conn);
        connections.add(connection);
        connection.done = serveConnection(connection);
      }
    } catch {
      // The listener was closed.
    }
  };

  const listen = () => {
    const server = Deno.listen({ hostname: "127.0.0.1", port });
    listener = server;
    port = (server.addr as Deno.NetAddr).port;
    accepting = acceptLoop(server);
  };

  const stop = async () => {
    cancelDelays();
    const running = listener;
    listener = undefined;
    if (running === undefined) return;
    try {
      running.close();
    } catch {
      // Already closed.
    }
    await accepting;
    for (const connection of connections) {
      connection.closing = true;
      // An idle keep-alive connection is closed now; a busy one after its answer.
      if (connection.idle) connection.close();
    }
    await Promise.all([...connections].map((connection) => connection.done));
  };

  listen();

  return Promise.resolve({
    get url() {
      return `http://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    get mode() {
      return mode;
    },
    put,
    remove,
    clear,
    mountSegment,
    unmountSegment(name) {
      for (const [key, object] of objects) {
        object.memory.delete(name);
        if (
          object.memory.size === 0 && object.localDisk.size === 0 &&
          object.sharedDiskSize === undefined
        ) objects.delete(key);
      }
      segments.delete(name);
    },
    setLeader(view) {
      leader = view;
    },
    get store() {
      return store;
    },
    async demote() {
      await this.setMode("standby503");
    },
    async promote(view) {
      if (view !== undefined) leader = view;
      await this.setMode("ok");
    },
    async setMode(next) {
      if (closed) throw new Error("the fake Mooncake master is closed");
      const previous = mode;
      mode = next;
      if (next === "down" && previous !== "down") await stop();
      else if (next !== "down" && listener === undefined) {
        try {
          listen();
        } catch (error) {
          throw new Error(
            `cannot re-open the fake Mooncake master on port ${port}: ${String(error)}`,
          );
        }
      }
    },
    setDelayMs(ms) {
      delayMs = Math.max(0, ms);
    },
    get requests() {
      return requests;
    },
    get count() {
      return received;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    resetLog() {
      requests.length = 0;
      received = 0;
      maxInFlight = inFlight;
    },
    async close() {
      if (closed) return;
      closed = true;
      await stop();
    },
  });
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1, the way cinatra reads and writes it.

class Connection {
  buffer = new Uint8Array(0);
  /** Waiting for a request (closing it now loses nothing). */
  idle = true;
  closing = false;
  done: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(readonly conn: Deno.TcpConn) {}

  /** Reads more bytes into `buffer`; false at the end of the stream. */
  async fill(): Promise<boolean> {
    const chunk = new Uint8Array(65536);
    const n = await this.conn.read(chunk);
    if (n === null) return false;
    const next = new Uint8Array(this.buffer.length + n);
    next.set(this.buffer);
    next.set(chunk.subarray(0, n), this.buffer.length);
    this.buffer = next;
    return true;
  }

  take(n: number): Uint8Array {
    const taken = this.buffer.slice(0, n);
    this.buffer = this.buffer.slice(n);
    return taken;
  }

  async write(bytes: Uint8Array): Promise<void> {
    for (let written = 0; written < bytes.length;) {
      written += await this.conn.write(bytes.subarray(written));
    }
  }

  close() {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.conn.close();
    } catch {
      // Already closed by the peer.
    }
  }
}

interface ParsedRequest {
  method: string;
  /** The request target as sent, one char per byte. */
  target: string;
  body: Uint8Array;
  /** `Connection: close`: answer, then close. */
  close: boolean;
}

/** The next request, `{invalid}` for one cinatra refuses, undefined when the client left. */
async function readRequest(
  connection: Connection,
): Promise<ParsedRequest | { invalid: string } | undefined> {
  let end = -1;
  let from = 0;
  while ((end = indexOfHeadEnd(connection.buffer, from)) === -1) {
    from = Math.max(0, connection.buffer.length - 3);
    if (connection.buffer.length > MAX_HEAD_BYTES) return { invalid: "invalid http protocol" };
    if (!await connection.fill()) return undefined;
  }
  const head = binaryOf(connection.take(end + 4)).slice(0, end);
  const lines = head.split("\r\n");
  const requestLine = /^([A-Z]+) (\S+) HTTP\/1\.[01]$/.exec(lines[0]);
  if (requestLine === null) return { invalid: "invalid http protocol" };
  const headers = new Map<string, string>();
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    if (colon <= 0) return { invalid: "invalid http protocol" };
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!headers.has(name)) headers.set(name, line.slice(colon + 1).trim());
  }
  const method = requestLine[1];
  let body: Uint8Array = new Uint8Array(0);
  // cinatra reads no body for GET and HEAD, whatever the headers say.
  if (method !== "GET" && method !== "HEAD") {
    if (headers.get("transfer-encoding")?.toLowerCase() === "chunked") {
      const chunked = await readChunked(connection);
      if (chunked === undefined) return undefined;
      body = chunked;
    } else {
      const length = Number(headers.get("content-length") ?? "0");
      if (!Number.isSafeInteger(length) || length < 0) {
        return { invalid: "invalid http content length" };
      }
      while (connection.buffer.length < length) {
        if (!await connection.fill()) return undefined;
      }
      body = connection.take(length);
    }
  }
  return {
    method,
    target: requestLine[2],
    body,
    close: /(^|,)\s*close\s*(,|$)/i.test(headers.get("connection") ?? ""),
  };
}

async function readChunked(connection: Connection): Promise<Uint8Array | undefined> {
  const parts: Uint8Array[] = [];
  while (true) {
    let lineEnd: number;
    while ((lineEnd = indexOfCrlf(connection.buffer)) === -1) {
      if (!await connection.fill()) return undefined;
    }
    const size = parseInt(binaryOf(connection.take(lineEnd + 2)), 16);
    if (!Number.isFinite(size)) return undefined;
    while (connection.buffer.length < size + 2) {
      if (!await connection.fill()) return undefined;
    }
    if (size === 0) {
      // Trailers, if any, end with an empty line.
      while (indexOfCrlf(connection.buffer) !== 0) {
        const next = indexOfCrlf(connection.buffer);
        if (next === -1) {
          if (!await connection.fill()) return undefined;
        } else connection.take(next + 2);
      }
      connection.take(2);
      break;
    }
    parts.push(connection.take(size));
    connection.take(2);
  }
  const body = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let at = 0;
  for (const part of parts) {
    body.set(part, at);
    at += part.length;
  }
  return body;
}

function indexOfHeadEnd(bytes: Uint8Array, from: number): number {
  for (let i = from; i + 3 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 && bytes[i + 3] === 10) {
      return i;
    }
  }
  return -1;
}

function indexOfCrlf(bytes: Uint8Array): number {
  for (let i = 0; i + 1 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10) return i;
  }
  return -1;
}

/** Status line, `Server`, `Content-Length`, `Date`, then `Content-Type`: cinatra's order. */
function encodeReply(reply: Reply, headOnly: boolean): Uint8Array {
  const body = typeof reply.body === "string" ? encoder.encode(reply.body) : reply.body;
  let head = `HTTP/1.1 ${reply.status} ${REASONS[reply.status] ?? "Unknown"}\r\n` +
    `Server: cinatra\r\nContent-Length: ${body.length}\r\nDate: ${new Date().toUTCString()}\r\n`;
  if (reply.type !== undefined) head += `Content-Type: ${reply.type}\r\n`;
  head += "\r\n";
  const headBytes = encoder.encode(head);
  if (headOnly) return headBytes;
  const bytes = new Uint8Array(headBytes.length + body.length);
  bytes.set(headBytes);
  bytes.set(body, headBytes.length);
  return bytes;
}

function jsonReply(status: number, body: string): Reply {
  return { status, body, type: JSON_TYPE };
}

/** What cinatra sends when a handler set no content: the status line's text, no Content-Type. */
function defaultReply(status: number): Reply {
  return { status, body: `${status} ${REASONS[status]}` };
}

/** cinatra's query map: `&`-separated, first occurrence wins, names and values kept raw. */
function parseQuery(rawQuery: string): Map<string, string> {
  const query = new Map<string, string>();
  for (const part of rawQuery.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const name = eq === -1 ? part : part.slice(0, eq);
    if (name === "") continue;
    if (!query.has(name)) query.set(name, eq === -1 ? "" : part.slice(eq + 1));
  }
  return query;
}

/**
 * cinatra's `url_decode` over a one-char-per-byte string: `+` is a space, `%XY` a byte, and a
 * malformed or cut escape writes `?` and stops decoding (the rest of the text is dropped).
 */
function cinatraUrlDecode(raw: string): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c === 0x25) {
      const hi = hexValue(raw.charCodeAt(i + 1));
      const lo = hexValue(raw.charCodeAt(i + 2));
      if (hi === undefined || lo === undefined) {
        out.push(0x3f);
        break;
      }
      out.push(hi * 16 + lo);
      i += 2;
    } else out.push(c === 0x2b ? 0x20 : c);
  }
  return Uint8Array.from(out);
}

function hexValue(c: number): number | undefined {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  return undefined;
}

/** v0.3.12+: split on every comma, keeping empty keys. Empty value: no keys. */
function commaSplit(bytes: Uint8Array): Uint8Array[] {
  if (bytes.length === 0) return [];
  const keys: Uint8Array[] = [];
  let start = 0;
  for (let i = 0; i <= bytes.length; i++) {
    if (i === bytes.length || bytes[i] === 0x2c) {
      keys.push(bytes.subarray(start, i));
      start = i + 1;
    }
  }
  return keys;
}

/** v0.3.9-0.3.11 split with `std::getline`: no trailing empty key. */
function getlineSplit(bytes: Uint8Array): Uint8Array[] {
  const keys = commaSplit(bytes);
  if (keys.length > 0 && keys[keys.length - 1].length === 0) keys.pop();
  return keys;
}

function binaryOf(bytes: Uint8Array): string {
  let text = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    text += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return text;
}

function encodeBinary(text: string): Uint8Array {
  return Uint8Array.from(text, (c) => c.charCodeAt(0) & 0xff);
}

function utf8OrUndefined(bytes: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Bodies, written the way struct_json (iguana) writes them.

class NotUtf8 extends Error {}

const PLAIN_JSON = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;
const SHORT_ESCAPES: Record<number, string> = { 8: "b", 9: "t", 10: "n", 12: "f", 13: "r" };

/** A JSON string as iguana writes it: `\uXXXX` (upper-case) for controls and non-ASCII. */
export function iguanaString(value: string): string {
  if (PLAIN_JSON.test(value)) return `"${value}"`;
  let out = '"';
  for (const ch of value) {
    const cp = ch.codePointAt(0)!;
    if (cp === 0x22) out += '\\"';
    else if (cp === 0x5c) out += "\\\\";
    else if (cp < 0x20) out += SHORT_ESCAPES[cp] ? `\\${SHORT_ESCAPES[cp]}` : `\\u${hex4(cp)}`;
    else if (cp < 0x80) out += ch;
    else if (cp >= 0xd800 && cp <= 0xdfff) throw new NotUtf8("lone surrogate");
    else if (cp <= 0xffff) out += `\\u${hex4(cp)}`;
    else {
      const s = cp - 0x10000;
      out += `\\u${hex4(0xd800 + (s >> 10))}\\u${hex4(0xdc00 + (s & 0x3ff))}`;
    }
  }
  return `${out}"`;
}

function hex4(n: number): string {
  return n.toString(16).toUpperCase().padStart(4, "0");
}

/** A double as iguana writes it (dragonbox, shortest): `5.7220458984375E-4`, `0E0`, `1.5E1`. */
export function iguanaDouble(value: number): string {
  const [mantissa, exponent] = value.toExponential().split("e");
  return `${mantissa}E${exponent.startsWith("+") ? exponent.slice(1) : exponent}`;
}

/** A finite double's exact value: `digits / 10^scale`. */
function exactDecimal(value: number): { digits: bigint; scale: number } {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(value));
  const bits = view.getBigUint64(0);
  const biased = Number(bits >> 52n);
  const fraction = bits & 0xfffffffffffffn;
  const mantissa = biased === 0 ? fraction : fraction | (1n << 52n);
  const exponent = (biased === 0 ? 1 : biased) - 1075;
  if (exponent >= 0) return { digits: mantissa << BigInt(exponent), scale: 0 };
  return { digits: mantissa * 5n ** BigInt(-exponent), scale: -exponent };
}

/** `digits / 10^drop`, rounded half to even, as glibc's printf rounds the exact value. */
function roundHalfEven(digits: bigint, drop: number): bigint {
  if (drop <= 0) return digits * 10n ** BigInt(-drop);
  const unit = 10n ** BigInt(drop);
  const quotient = digits / unit;
  const twice = (digits % unit) * 2n;
  return twice > unit || (twice === unit && quotient % 2n === 1n) ? quotient + 1n : quotient;
}

/** `std::fixed << std::setprecision(places)` for a non-negative double. */
function fixed(value: number, places: number): string {
  const { digits, scale } = exactDecimal(value);
  const text = roundHalfEven(digits, scale - places).toString().padStart(places + 1, "0");
  return places === 0 ? text : `${text.slice(0, -places)}.${text.slice(-places)}`;
}

/** `std::ostream << double` (`%g`, six significant digits) for a non-negative double. */
function streamDouble(value: number): string {
  if (value === 0) return "0";
  const precision = 6;
  const { digits, scale } = exactDecimal(value);
  let exponent = digits.toString().length - 1 - scale;
  let significant = roundHalfEven(digits, digits.toString().length - precision);
  if (significant.toString().length > precision) {
    significant /= 10n;
    exponent++;
  }
  const figures = significant.toString();
  if (exponent < -4 || exponent >= precision) {
    const mantissa = trimFraction(`${figures[0]}.${figures.slice(1)}`);
    const sign = exponent < 0 ? "-" : "+";
    return `${mantissa}e${sign}${String(Math.abs(exponent)).padStart(2, "0")}`;
  }
  const text = exponent >= 0
    ? `${figures.slice(0, exponent + 1)}.${figures.slice(exponent + 1)}`
    : `0.${"0".repeat(-exponent - 1)}${figures}`;
  return trimFraction(text);
}

/** `%g` drops trailing zeros of the fraction, then a bare point. */
function trimFraction(text: string): string {
  return text.replace(/0+$/, "").replace(/\.$/, "");
}

/** Code-point (= UTF-8 byte) order, as `std::map<std::string>` sorts keys. */
function byteOrder(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return utf16Fixup(x) - utf16Fixup(y);
  }
  return a.length - b.length;
}

function utf16Fixup(unit: number): number {
  return unit >= 0xe000 ? unit - 0x800 : unit >= 0xd800 ? unit + 0x2000 : unit;
}

function firstFit(segment: Segment, size: number): number {
  let offset = 0;
  for (const buffer of segment.used) {
    if (buffer.offset - offset >= size) break;
    offset = Math.max(offset, buffer.offset + buffer.size);
  }
  return offset;
}

/** Places a buffer in the segment (first fit unless `address` says where); its address. */
function allocate(segment: Segment, size: number, address?: number): number {
  const offset = address === undefined ? firstFit(segment, size) : address - segment.baseAddress;
  let i = segment.used.length;
  while (i > 0 && segment.used[i - 1].offset > offset) i--;
  segment.used.splice(i, 0, { offset, size });
  return segment.baseAddress + offset;
}

function readable(object: StoredObject): boolean {
  return object.ready &&
    (object.memory.size > 0 || object.localDisk.size > 0 || object.sharedDiskSize !== undefined);
}

function memoryDescriptors(object: StoredObject, segments: Map<string, Segment>): string {
  return [...object.memory].map(([endpoint, replica]) =>
    `{"size_":${replica.size},"buffer_address_":${replica.address},` +
    `"protocol_":${iguanaString(segments.get(endpoint)?.protocol ?? "tcp")},` +
    `"transport_endpoint_":${iguanaString(endpoint)}}`
  ).join(",");
}

/** v0.3.12+: `struct_json` of a `std::map`, sorted, every optional field written. */
function newBody(
  keys: string[],
  objects: Map<string, StoredObject>,
  segments: Map<string, Segment>,
): string {
  const sorted = [...new Set(keys)].sort(byteOrder);
  const entries = sorted.map((key) => {
    const object = objects.get(key);
    let entry: string;
    if (object === undefined || !readable(object)) {
      const error = object === undefined ? "OBJECT_NOT_FOUND" : "REPLICA_IS_NOT_READY";
      entry = `{"ok":false,"error":"${error}","values":null,"disk_values":null,` +
        `"local_disk_values":null,"nof_values":null}`;
    } else {
      const disk = object.sharedDiskSize === undefined
        ? "null"
        : `[{"file_path":${iguanaString(`/mnt/mooncake/${key}`)},` +
          `"object_size":${object.sharedDiskSize}}]`;
      const local = object.localDisk.size === 0
        ? "null"
        : `[${
          [...object.localDisk].map(([endpoint, size]) =>
            `{"client_id":${
              iguanaString(segments.get(endpoint)?.clientId ?? clientIdOf(endpoint))
            },` +
            `"object_size":${size},"transport_endpoint":${iguanaString(endpoint)}}`
          ).join(",")
        }]`;
      entry = `{"ok":true,"error":null,"values":[${memoryDescriptors(object, segments)}],` +
        `"disk_values":${disk},"local_disk_values":${local},"nof_values":null}`;
    }
    return `${iguanaString(key)}:${entry}`;
  });
  return `{"success":true,"data":{${entries.join(",")}}}`;
}

/** v0.3.9-0.3.11: hand-written, request order, key written raw, memory replicas only. */
function oldBody(keys: string[], objects: Map<string, StoredObject>): string {
  const entries = keys.map((key) => {
    const object = objects.get(key);
    if (object === undefined) return `"${key}":{"ok":false,"error":"OBJECT_NOT_FOUND"}`;
    if (!object.ready) return `"${key}":{"ok":false,"error":"REPLICA_IS_NOT_READY"}`;
    const values = [...object.memory].map(([endpoint, replica]) =>
      JSON.stringify({
        size_: replica.size,
        buffer_address_: replica.address,
        protocol_: "tcp",
        transport_endpoint_: endpoint,
      })
    );
    return `"${key}":{"ok":true,"values":[${values.join(",")}]}`;
  });
  return `{"success":true,"data":{${entries.join(",")}}}`;
}

function leaderFields(leader: LeaderView | undefined): string {
  return leader === undefined
    ? `"leader_address":null,"view_version":null`
    : `"leader_address":${iguanaString(leader.address)},"view_version":${leader.viewVersion}`;
}

function linesOf(names: Iterable<string>): string {
  let body = "";
  for (const name of names) body += `${name}\n`;
  return body;
}

function segmentsDetail(segments: Map<string, Segment>): string {
  const items = [...segments.values()].map((segment) => {
    const used = segment.used.reduce((sum, buffer) => sum + buffer.size, 0);
    const percent = segment.size > 0 ? (used / segment.size) * 100 : 0;
    return `{"segment_name":${iguanaString(segment.name)},` +
      `"segment_id":${iguanaString(segment.segmentId)},` +
      `"client_id":${iguanaString(segment.clientId)},` +
      `"base_address":"0x${segment.baseAddress.toString(16)}",` +
      `"size_bytes":${segment.size},` +
      `"size_human":"${streamDouble(segment.size / 1024 ** 3)} GiB",` +
      `"te_endpoint":${iguanaString(segment.name)},"protocol":${iguanaString(segment.protocol)},` +
      `"status":"OK","allocator_used_bytes":${used},` +
      `"allocator_capacity_bytes":${segment.size},` +
      `"allocator_usage_percent":${iguanaDouble(percent)}}`;
  });
  return `{"total_segments":${items.length},"segments":[${items.join(",")}]}`;
}

/** Mooncake's `byte_size_to_string`. */
function byteSize(bytes: number): string {
  const units: [number, string][] = [[1024 ** 4, "TB"], [1024 ** 3, "GB"], [1024 ** 2, "MB"], [
    1024,
    "KB",
  ]];
  for (const [unit, name] of units) {
    if (bytes >= unit) return `${fixed(bytes / unit, 2)} ${name}`;
  }
  return `${bytes} B`;
}

const RATE_PAIR = "0.00/0.00";
const RATE_TRIPLE = "0.00/0.00/0.00";
const SUMMARY_REQUESTS = "Requests (Success/Total per sec): " + [
  "PutStart",
  "PutEnd",
  "PutRevoke",
  "Get",
  "Exist",
  "Del",
  "DelAll",
  "Ping",
  "CopyStart",
  "CopyEnd",
  "CopyRevoke",
  "MoveStart",
  "MoveEnd",
  "MoveRevoke",
  "EvictDiskReplica",
].map((name) => `${name}=${RATE_PAIR}`).join(", ");
const SUMMARY_BATCHES = "Batch Requests (per sec, Req=Success/PartialSuccess/Total, " +
  "Item=Success/Total): " + [
  ...["PutStart", "PutEnd", "PutRevoke", "Get", "ExistKey", "QueryIp", "Clear"].map((name) =>
    `${name}:(Req=${RATE_TRIPLE}, Item=${RATE_PAIR})`
  ),
  ...["CreateMoveTask", "CreateCopyTask", "QueryTask", "FetchTasks", "MarkTaskToComplete"].map(
    (name) => `${name}:(Req=${RATE_PAIR})`,
  ),
].join(", ");
const SUMMARY_TAIL = "Eviction: Success/Attempts=0/0, AllocFail=0, PartialAlloc=0, keys=0, " +
  "size=0 B | Mem Eviction: Success/Attempts=0/0, keys=0, size=0 B | NoF Eviction: " +
  "Success/Attempts=0/0, keys=0, size=0 B | Discard: Released/Total=0/0, StagingSize=0 B | " +
  "Promotion: in_flight=0, admitted=0, completed=0, failed=0, cancelled=0, expired=0, bytes=0 B, " +
  "rejected(freq/wm/cap)=0/0/0 | Snapshots: Success=0, Fail=0";
const HA_SUMMARY = "HA Metrics Summary: last_seq=0, applied_seq=0, lag=0, pending=0, " +
  "mutation_queue=0, batch_commits=0, sync_commits=0, skipped=0, checksum_fail=0, etcd_fail=0, " +
  "watch_disconn=0, state=0";

/** `/metrics/summary`: the master's one-line summary; request rates are always 0.00 here. */
function metricsSummary(
  role: string,
  state: string,
  ready: boolean,
  leader: LeaderView | undefined,
  objects: Map<string, StoredObject>,
  segments: Map<string, Segment>,
): string {
  let used = 0;
  let capacity = 0;
  for (const segment of segments.values()) {
    capacity += segment.size;
    for (const buffer of segment.used) used += buffer.size;
  }
  const share = capacity > 0 ? ` (${fixed((used / capacity) * 100, 1)}%)` : "";
  const clients = new Set([...segments.values()].map((segment) => segment.clientId)).size;
  const master = `Mem Storage: ${byteSize(used)} / ${byteSize(capacity)}${share} | ` +
    `NVMe-oF SSD: 0 B / 0 B | SSD Storage: 0 B / 0 B | Keys: ${objects.size} (soft-pinned: 0) | ` +
    `Clients: ${clients} | ${SUMMARY_REQUESTS} | ${SUMMARY_BATCHES} | ${SUMMARY_TAIL}`;
  const view = leader === undefined
    ? ""
    : `, leader=${leader.address}, view_version=${leader.viewVersion}`;
  return `role=${role}, state=${state}, service_ready=${ready}, master={${master}}, ` +
    `ha={${HA_SUMMARY}}${view}`;
}

/** A subset of the master's Prometheus series, enough for scrapers to find something real. */
function metrics(objects: Map<string, StoredObject>, queries: number): string {
  let memoryBytes = 0;
  for (const object of objects.values()) {
    for (const replica of object.memory.values()) memoryBytes += replica.size;
  }
  return [
    "# HELP master_key_count Total number of keys managed by the master",
    "# TYPE master_key_count gauge",
    `master_key_count ${objects.size}`,
    "# HELP master_allocated_bytes Total bytes currently allocated across all segments",
    "# TYPE master_allocated_bytes gauge",
    `master_allocated_bytes ${memoryBytes}`,
    "# HELP fake_master_batch_query_keys_requests_total Requests to /batch_query_keys (fake only)",
    "# TYPE fake_master_batch_query_keys_requests_total counter",
    `fake_master_batch_query_keys_requests_total ${queries}`,
    "",
  ].join("\n");
}

function clientIdOf(endpoint: string): string {
  return uuidOf(endpoint, 2);
}

/** A stable id derived from a name (FNV-1a 64), printed as the master prints UUIDs: `u64-u64`. */
function uuidOf(name: string, salt: number): string {
  const half = (round: number) => {
    let hash = 0xcbf29ce484222325n ^ BigInt(salt * 2 + round);
    for (const byte of encoder.encode(name)) {
      hash ^= BigInt(byte);
      hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
    }
    return hash.toString();
  };
  return `${half(0)}-${half(1)}`;
}

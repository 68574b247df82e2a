/**
 * A Mooncake master's admin HTTP port (compat.md §4) on 127.0.0.1, speaking the formats real
 * masters write, for tests and the demo's embedded cluster.
 *
 * Modes:
 * - `ok`: v0.3.12+ — keys percent-decoded once, `data` a sorted map, every field written (`null`
 *   when empty), memory / local-disk / shared-disk replicas, REPLICA_IS_NOT_READY.
 * - `old_version`: v0.3.9-0.3.11 — keys taken raw, hand-written JSON in request order (duplicates
 *   kept), memory replicas only, `{"ok":false,"error":"OBJECT_NOT_FOUND"}`, `/health` plain `OK`.
 * - `slow`: `ok` after `delayMs` (default 200 ms).
 * - `down`: the listener is closed (connection refused); any other mode re-opens the same port.
 * - `standby503`: an HA standby: 503 `{"success":false,"error":"service plane is not active"}`.
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
  | "http500";

export type ReplicaTier = "memory" | "local_disk" | "shared_disk";

export interface PutOptions {
  /** Where the replica lives (default memory, on `endpoint`). Shared disk ignores the endpoint. */
  tier?: ReplicaTier;
  /** False: the key is still being written (REPLICA_IS_NOT_READY). Default true. */
  ready?: boolean;
  /** Object size in bytes (default 1 MiB). */
  size?: number;
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

export interface FakeMasterOptions {
  mode?: FakeMasterMode;
  delayMs?: number;
  /** Port to bind (default 0: any free port). */
  port?: number;
}

export interface FakeMooncakeMaster {
  readonly url: string;
  readonly port: number;
  readonly mode: FakeMasterMode;
  put(key: string, endpoint: string, options?: PutOptions): void;
  remove(key: string): void;
  clear(): void;
  /** Switch behaviour; `down` closes the listener, leaving `down` re-opens it on the same port. */
  setMode(mode: FakeMasterMode): Promise<void>;
  setDelayMs(ms: number): void;
  /** Every `/batch_query_keys` request received, oldest first. */
  readonly requests: readonly FakeMasterRequest[];
  /** Number of `/batch_query_keys` requests received. */
  readonly count: number;
  /** Most `/batch_query_keys` requests being answered at the same time. */
  readonly maxInFlight: number;
  /** Forget the request log and the in-flight maximum. */
  resetLog(): void;
  close(): Promise<void>;
}

interface StoredObject {
  ready: boolean;
  memory: Map<string, number>;
  localDisk: Map<string, number>;
  sharedDiskSize: number | undefined;
}

const JSON_TYPE = "application/json; charset=utf-8";
const TEXT_TYPE = "text/plain; version=0.0.4";
const DEFAULT_SIZE = 1 << 20;
const BASE_ADDRESS = 140231004368896;

/** Starts listening on 127.0.0.1 (a free port unless `port` is given) before it resolves. */
export function startFakeMooncakeMaster(
  options: FakeMasterOptions = {},
): Promise<FakeMooncakeMaster> {
  const objects = new Map<string, StoredObject>();
  const requests: FakeMasterRequest[] = [];
  const pendingDelays = new Set<AbortController>();
  let mode: FakeMasterMode = options.mode ?? "ok";
  let delayMs = options.delayMs ?? 200;
  let inFlight = 0;
  let maxInFlight = 0;
  let server: Deno.HttpServer<Deno.NetAddr> | undefined;
  let port = options.port ?? 0;
  let closed = false;

  const put = (key: string, endpoint: string, options: PutOptions = {}) => {
    const object = objects.get(key) ??
      { ready: true, memory: new Map(), localDisk: new Map(), sharedDiskSize: undefined };
    const size = options.size ?? DEFAULT_SIZE;
    const tier = options.tier ?? "memory";
    if (tier === "memory") object.memory.set(endpoint, size);
    else if (tier === "local_disk") object.localDisk.set(endpoint, size);
    else object.sharedDiskSize = size;
    object.ready = options.ready ?? true;
    objects.set(key, object);
  };

  // Not tied to `request.signal` (Deno's legacy abort fires it after every response): a delay
  // whose client gave up runs to its end, and `down` / `close()` cut every delay short.
  const delay = (ms: number) =>
    new Promise<void>((resolve) => {
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

  const batchQueryKeys = async (rawQuery: string): Promise<Response> => {
    const current = mode;
    const raw = rawQueryValue(rawQuery, "keys");
    const keys = current === "old_version" ? splitLikeGetline(raw) : splitDecoded(decodeQuery(raw));
    requests.push({ rawQuery, keys, mode: current, at: performance.now() });
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      if (current === "slow") await delay(delayMs);
      switch (current) {
        case "standby503":
          return json(503, `{"success":false,"error":"service plane is not active"}`);
        case "garbage":
          return new Response(`{"success":true,"data":{"<html>oops`, {
            status: 200,
            headers: { "content-type": JSON_TYPE },
          });
        case "http500":
          return new Response("Internal Server Error", { status: 500 });
      }
      if (keys.length === 0) {
        return json(400, `{"success":false,"error":"No keys provided. Use ?keys=key1,key2,..."}`);
      }
      return json(200, current === "old_version" ? oldBody(keys, objects) : newBody(keys, objects));
    } finally {
      inFlight--;
    }
  };

  const admin = async (request: Request, path: string): Promise<Response> => {
    if (path === "/_fake/state") {
      return json(200, JSON.stringify({ mode, count: requests.length, keys: [...objects.keys()] }));
    }
    if (request.method !== "POST") return new Response("use POST", { status: 405 });
    let body: Record<string, unknown> = {};
    try {
      const text = await request.text();
      if (text !== "") body = JSON.parse(text);
    } catch {
      return json(400, `{"success":false,"error":"body is not JSON"}`);
    }
    const keys = Array.isArray(body.keys)
      ? body.keys.map(String)
      : typeof body.key === "string"
      ? [body.key]
      : [];
    if (path === "/_fake/clear") objects.clear();
    else if (path === "/_fake/remove") { for (const key of keys) objects.delete(key); }
    else if (path === "/_fake/put") {
      const endpoint = typeof body.endpoint === "string" ? body.endpoint : "";
      for (const key of keys) {
        put(key, endpoint, {
          tier: body.tier as ReplicaTier | undefined,
          ready: typeof body.ready === "boolean" ? body.ready : undefined,
          size: typeof body.size === "number" ? body.size : undefined,
        });
      }
    } else return new Response("not found", { status: 404 });
    return json(200, JSON.stringify({ success: true, keys: keys.length }));
  };

  const handler = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const rawQuery = url.search.startsWith("?") ? url.search.slice(1) : url.search;
    const path = url.pathname;
    if (path.startsWith("/_fake/")) return await admin(request, path);
    if (request.method !== "GET") return new Response("method not allowed", { status: 405 });
    if (path === "/batch_query_keys") return await batchQueryKeys(rawQuery);
    if (path === "/health") return health(mode);
    if (mode === "standby503") {
      return json(
        503,
        `{"success":false,"error_code":-1011,"error_message":"service plane is not active"}`,
      );
    }
    if (path === "/get_all_keys") return text([...objects.keys()].map((k) => `${k}\n`).join(""));
    if (path === "/get_all_segments") {
      return text(segments(objects).map((s) => `${s}\n`).join(""));
    }
    if (path === "/get_segments_detail") return json(200, segmentsDetail(objects));
    if (path === "/metrics") return text(metrics(objects, requests.length));
    return new Response("Not Found", { status: 404 });
  };

  const listen = () => {
    server = Deno.serve(
      { hostname: "127.0.0.1", port, onListen: () => {} },
      handler,
    );
    port = server.addr.port;
  };

  const stop = async () => {
    cancelDelays();
    const running = server;
    server = undefined;
    if (running !== undefined) await running.shutdown();
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
    remove(key) {
      objects.delete(key);
    },
    clear() {
      objects.clear();
    },
    async setMode(next) {
      if (closed) throw new Error("the fake Mooncake master is closed");
      const previous = mode;
      mode = next;
      if (next === "down" && previous !== "down") await stop();
      else if (next !== "down" && server === undefined) {
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
      return requests.length;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    resetLog() {
      requests.length = 0;
      maxInFlight = inFlight;
    },
    async close() {
      if (closed) return;
      closed = true;
      await stop();
    },
  });
}

/** The value of one query parameter exactly as sent (no decoding), "" when absent. */
function rawQueryValue(rawQuery: string, name: string): string {
  for (const part of rawQuery.split("&")) {
    const eq = part.indexOf("=");
    if ((eq === -1 ? part : part.slice(0, eq)) === name) return eq === -1 ? "" : part.slice(eq + 1);
  }
  return "";
}

/** v0.3.12+ decodes the value once (`+` as a space, as form decoding does). */
function decodeQuery(raw: string): string {
  try {
    return decodeURIComponent(raw.replaceAll("+", " "));
  } catch {
    return raw;
  }
}

/** v0.3.12+: split on every comma, keeping a trailing empty key. Empty value: no keys. */
function splitDecoded(value: string): string[] {
  return value === "" ? [] : value.split(",");
}

/** v0.3.9-0.3.11 split with `std::getline`: no trailing empty key. */
function splitLikeGetline(value: string): string[] {
  if (value === "") return [];
  const keys = value.split(",");
  if (keys[keys.length - 1] === "") keys.pop();
  return keys;
}

function memoryDescriptors(object: StoredObject): string[] {
  let address = BASE_ADDRESS;
  return [...object.memory].map(([endpoint, size]) => {
    const descriptor = JSON.stringify({
      size_: size,
      buffer_address_: address,
      protocol_: "tcp",
      transport_endpoint_: endpoint,
    });
    address += size;
    return descriptor;
  });
}

function readable(object: StoredObject | undefined): object is StoredObject {
  return object !== undefined && object.ready &&
    (object.memory.size > 0 || object.localDisk.size > 0 || object.sharedDiskSize !== undefined);
}

/** v0.3.12+: `struct_json` of a `std::map`, sorted, every optional field written. */
function newBody(keys: string[], objects: Map<string, StoredObject>): string {
  const sorted = [...new Set(keys)].sort();
  const entries = sorted.map((key) => {
    const object = objects.get(key);
    let entry: string;
    if (!readable(object)) {
      const error = object === undefined ? "OBJECT_NOT_FOUND" : "REPLICA_IS_NOT_READY";
      entry = `{"ok":false,"error":"${error}","values":null,"disk_values":null,` +
        `"local_disk_values":null,"nof_values":null}`;
    } else {
      const disk = object.sharedDiskSize === undefined
        ? "null"
        : `[${
          JSON.stringify({ file_path: `/mnt/mooncake/${key}`, object_size: object.sharedDiskSize })
        }]`;
      const local = object.localDisk.size === 0
        ? "null"
        : `[${
          [...object.localDisk].map(([endpoint, size]) =>
            JSON.stringify({
              client_id: clientIdOf(endpoint),
              object_size: size,
              transport_endpoint: endpoint,
            })
          ).join(",")
        }]`;
      entry = `{"ok":true,"error":null,"values":[${memoryDescriptors(object).join(",")}],` +
        `"disk_values":${disk},"local_disk_values":${local},"nof_values":null}`;
    }
    return `${JSON.stringify(key)}:${entry}`;
  });
  return `{"success":true,"data":{${entries.join(",")}}}`;
}

/** v0.3.9-0.3.11: hand-written, request order, key written raw, memory replicas only. */
function oldBody(keys: string[], objects: Map<string, StoredObject>): string {
  const entries = keys.map((key) => {
    const object = objects.get(key);
    if (object === undefined) return `"${key}":{"ok":false,"error":"OBJECT_NOT_FOUND"}`;
    if (!object.ready) return `"${key}":{"ok":false,"error":"REPLICA_IS_NOT_READY"}`;
    return `"${key}":{"ok":true,"values":[${memoryDescriptors(object).join(",")}]}`;
  });
  return `{"success":true,"data":{${entries.join(",")}}}`;
}

function health(mode: FakeMasterMode): Response {
  if (mode === "old_version") return text("OK");
  const standby = mode === "standby503";
  return json(
    200,
    JSON.stringify({
      status: "ok",
      role: standby ? "standby" : "leader",
      ha_state: standby ? "standby" : "serving",
      service_ready: !standby,
    }),
  );
}

function segments(objects: Map<string, StoredObject>): string[] {
  const names = new Set<string>();
  for (const object of objects.values()) {
    for (const endpoint of object.memory.keys()) names.add(endpoint);
  }
  return [...names].sort();
}

function segmentsDetail(objects: Map<string, StoredObject>): string {
  const capacity = 16 * 1024 ** 3;
  const used = new Map<string, number>();
  for (const object of objects.values()) {
    for (const [endpoint, size] of object.memory) {
      used.set(endpoint, (used.get(endpoint) ?? 0) + size);
    }
  }
  const items = segments(objects).map((name, i) => ({
    segment_name: name,
    segment_id: uuidOf(name, 1),
    client_id: clientIdOf(name),
    base_address: `0x${(0x300000000 + i * capacity).toString(16)}`,
    size_bytes: capacity,
    size_human: "16 GiB",
    te_endpoint: name,
    protocol: "tcp",
    status: "OK",
    allocator_used_bytes: used.get(name) ?? 0,
    allocator_capacity_bytes: capacity,
    allocator_usage_percent: ((used.get(name) ?? 0) / capacity) * 100,
  }));
  return JSON.stringify({ total_segments: items.length, segments: items });
}

/** A subset of the master's Prometheus series, enough for scrapers to find something real. */
function metrics(objects: Map<string, StoredObject>, queries: number): string {
  let memoryBytes = 0;
  for (const object of objects.values()) {
    for (const size of object.memory.values()) memoryBytes += size;
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

/** A stable UUID-shaped id derived from a name (FNV-1a), so answers are deterministic. */
function uuidOf(name: string, salt: number): string {
  let hash = 0x811c9dc5 ^ salt;
  const words: string[] = [];
  for (let round = 0; round < 4; round++) {
    for (let i = 0; i < name.length; i++) {
      hash ^= name.charCodeAt(i) + round;
      hash = Math.imul(hash, 0x01000193) >>> 0;
    }
    words.push(hash.toString(16).padStart(8, "0"));
  }
  const hex = words.join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${
    hex.slice(20, 32)
  }`;
}

function json(status: number, body: string): Response {
  return new Response(body, { status, headers: { "content-type": JSON_TYPE } });
}

function text(body: string): Response {
  return new Response(body, { status: 200, headers: { "content-type": TEXT_TYPE } });
}

import type { KeyLocation } from "./types.ts";
import { normalizeHost } from "./prefix.ts";

/**
 * Reading a Mooncake master's `GET /batch_query_keys` answer (docs/compat.md §4). Pure: status and
 * body in, per-key locations or a precise failure out. Never throws, whatever the body holds.
 *
 * Shapes seen in Mooncake's source (all `{"success":true,"data":{<key>:<entry>}}`):
 * - hand-written JSON (v0.3.9-0.3.11 and some later builds): entries `{"ok":true,"values":[...]}`
 *   or `{"ok":false,"error":"OBJECT_NOT_FOUND"}`, keys echoed in request order (duplicates
 *   possible), memory replicas only;
 * - `struct_json` with optional fields (v0.3.12+, and the current admin server, e.g. commit
 *   3b5a5941): `data` a map sorted by key bytes, one entry per distinct key, every field written.
 *   An absent or not-ready key has `"ok":false`, its `error` and every location list as `null`
 *   (`"values":null,"disk_values":null,"local_disk_values":null,"nof_values":null`); a present
 *   key has `"error":null`, `values` an array (maybe `[]`) and `disk_values` /
 *   `local_disk_values` / `nof_values` `null` unless they carry a replica. Nothing is omitted,
 *   whatever Mooncake's http-service.md says; tests/data/mooncake_master_responses.txt holds real
 *   answers. Omitted fields are still read like `null`, for the hand-written shape.
 * No master writes `data` as an array for this endpoint (`/query_key` does, for one key): an
 * array is reported as a failure rather than guessed at.
 *
 * Failures a real master sends: 400 `{"success":false,"error":"No keys provided. ..."}` (empty
 * `keys`), 503 `{"success":false,"error_code":-1011,"error_message":"service plane is not
 * active"}` (HA standby), a plain `404 Not Found` when the URL is not the admin port (e.g. the
 * HTTP metadata port). A key that is not UTF-8 once percent-decoded makes its writer throw, which
 * cinatra answers with a plain `503 Service Unavailable`: reported as a 503 like a standby.
 */
export type BatchQueryParse =
  | { ok: true; locations: Map<string, KeyLocation> }
  | {
    ok: false;
    error: string; /** The master said it is an HA standby (HTTP 503). */
    standby: boolean;
  };

const SNIPPET_CHARS = 120;

export function parseBatchQueryKeysResponse(status: number, body: string): BatchQueryParse {
  if (status !== 200) return failure(describeHttpError(status, body), status === 503);

  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return failure(`master answered 200 with invalid JSON: ${snippet(body)}`);
  }
  if (!isRecord(parsed)) {
    return failure(`master answered 200 with JSON that is not an object: ${snippet(body)}`);
  }
  if (parsed.success !== true) {
    const reason = errorText(parsed) ?? "no error given";
    return failure(`master answered success:${String(parsed.success)} (${reason})`);
  }
  const data = parsed.data;
  if (Array.isArray(data)) {
    return failure(
      "master answered with `data` as an array, not a key map: is the URL /batch_query_keys?",
    );
  }
  if (data === undefined || data === null) return { ok: true, locations: new Map() };
  if (!isRecord(data)) {
    return failure(`master answered with \`data\` of type ${typeof data}, expected a key map`);
  }

  const locations = new Map<string, KeyLocation>();
  for (const [key, entry] of Object.entries(data)) locations.set(key, parseEntry(entry));
  return { ok: true, locations };
}

/** One `data` entry. A malformed entry makes its key absent, never the whole batch a failure. */
export function parseEntry(entry: unknown): KeyLocation {
  if (!isRecord(entry)) {
    return {
      present: false,
      memoryHosts: [],
      localDiskHosts: [],
      sharedDisk: false,
      error: "MALFORMED_ENTRY",
    };
  }
  const error = typeof entry.error === "string" && entry.error !== "" ? entry.error : undefined;
  const memory = list(entry.values);
  const nof = list(entry.nof_values);
  const localDisk = list(entry.local_disk_values);
  const sharedDisk = list(entry.disk_values).length > 0;

  const memoryHosts = hostsOf(memory, "transport_endpoint_", "transport_endpoint");
  const localDiskHosts = hostsOf(localDisk, "transport_endpoint", "transport_endpoint_");
  // `ok:false` (OBJECT_NOT_FOUND, REPLICA_IS_NOT_READY, ...) is absent whatever else is listed;
  // an entry without `ok` counts by its replicas, like Llumnix's reader does.
  const readable = memory.length + nof.length + localDisk.length > 0 || sharedDisk;
  const location: KeyLocation = {
    present: entry.ok !== false && readable,
    memoryHosts,
    localDiskHosts,
    sharedDisk,
  };
  if (error !== undefined) location.error = error;
  return location;
}

/**
 * `10.0.0.5:12345` → `10.0.0.5`; `[fe80::1]:12345` → `fe80::1`; a bare host stays as it is.
 * An unbracketed string with several colons is an IPv6 address without a port: kept whole.
 */
export function hostOfEndpoint(endpoint: string): string | undefined {
  const trimmed = endpoint.trim();
  if (trimmed === "") return undefined;
  if (trimmed.startsWith("[")) {
    const close = trimmed.indexOf("]");
    return close > 1 ? normalizeHost(trimmed.slice(1, close)) : undefined;
  }
  const first = trimmed.indexOf(":");
  if (first === -1) return normalizeHost(trimmed);
  if (first !== trimmed.lastIndexOf(":")) return normalizeHost(trimmed);
  return first > 0 ? normalizeHost(trimmed.slice(0, first)) : undefined;
}

function hostsOf(items: unknown[], field: string, fallbackField: string): string[] {
  const hosts: string[] = [];
  for (const item of items) {
    if (!isRecord(item)) continue;
    const endpoint = typeof item[field] === "string"
      ? item[field]
      : typeof item[fallbackField] === "string"
      ? item[fallbackField]
      : undefined;
    const host = endpoint === undefined ? undefined : hostOfEndpoint(endpoint as string);
    if (host !== undefined && !hosts.includes(host)) hosts.push(host);
  }
  return hosts;
}

function describeHttpError(status: number, body: string): string {
  const detail = errorTextOfBody(body);
  if (status === 503) {
    return `master answered 503 (${detail}): an HA standby or a master still starting; ` +
      'list every master of the HA group in kv.url (e.g. kv.url: ["http://m1:9003", ' +
      '"http://m2:9003"]) and the router follows the one that serves';
  }
  if (status === 400) return `master answered 400 (${detail}): the query was malformed`;
  if (status === 404) {
    return `master answered 404 (${detail}): /batch_query_keys needs Mooncake v0.3.9+ on the ` +
      "admin port (--metrics_port, default 9003)";
  }
  return `master answered HTTP ${status} (${detail})`;
}

function errorTextOfBody(body: string): string {
  try {
    const parsed: unknown = JSON.parse(body);
    if (isRecord(parsed)) return errorText(parsed) ?? snippet(body);
  } catch {
    // Not JSON (e.g. a plain `STANDBY` from some HA builds): quote it.
  }
  return snippet(body);
}

function errorText(record: Record<string, unknown>): string | undefined {
  for (const field of ["error", "error_message", "message"]) {
    const value = record[field];
    if (typeof value === "string" && value !== "") return value;
  }
  return undefined;
}

function snippet(body: string): string {
  if (body.length === 0) return "empty body";
  const flat = body.replace(/\s+/g, " ");
  return JSON.stringify(flat.length > SNIPPET_CHARS ? `${flat.slice(0, SNIPPET_CHARS)}…` : flat);
}

function failure(error: string, standby = false): BatchQueryParse {
  return { ok: false, error, standby };
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

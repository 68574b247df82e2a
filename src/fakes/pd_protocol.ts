/**
 * The request side of the prefill/decode (P/D) protocols the fake engines speak, as pure
 * functions: what a prefill or decode instance of each protocol accepts, the registry key the two
 * halves of one request meet under, and the exact-integer reading of SGLang's `bootstrap_room`.
 * docs/compat.md §7 is the reference; every rule below names whether upstream enforces it too.
 */

export type PdProtocol = "vllm-nixl" | "vllm-mooncake" | "sglang";
export type PdRole = "prefill" | "decode";

export const PD_PROTOCOLS: readonly PdProtocol[] = ["vllm-nixl", "vllm-mooncake", "sglang"];

/** SGLang's and vLLM Mooncake's default bootstrap port. */
export const DEFAULT_BOOTSTRAP_PORT = 8998;

/** Upstream timeouts in engine seconds (scaled by the fake's `timeScale`). */
export const UPSTREAM_TIMEOUT_S: Readonly<Record<PdProtocol, number>> = Object.freeze({
  // NixlConnector `kv_lease_duration` (newest builds; older ones: VLLM_NIXL_ABORT_REQUEST_TIMEOUT
  // = 480 s): how long a prefill holds its blocks for the decode.
  "vllm-nixl": 30,
  // VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT: how long the prefill's sender waits for the prefill and
  // then holds its blocks for the decode.
  "vllm-mooncake": 480,
  // SGLANG_DISAGGREGATION_WAITING_TIMEOUT (decode) and ..._BOOTSTRAP_TIMEOUT (prefill).
  "sglang": 300,
});

/** SGLang's decode heartbeats the prefill's bootstrap server every 5 s; 2 misses = dead. */
export const SGLANG_HEARTBEAT_S = 5;
export const SGLANG_HEARTBEAT_MAX_FAILURES = 2;

/** `bootstrap_room` must fit a signed 64-bit integer (mini_lb draws from [0, 2^63 - 1]). */
export const MAX_BOOTSTRAP_ROOM = (1n << 63n) - 1n;

export type OpenAiBody = Record<string, unknown>;

/**
 * A JSON body plus the exact source text of its top-level `bootstrap_room`, if a number (or a
 * list of numbers, written back as `[d1,d2,...]`).
 */
export interface ParsedBody {
  value: unknown;
  /** Digits exactly as sent: JSON numbers above 2^53 lose precision once parsed. */
  roomSource?: string;
}

/**
 * JSON.parse that also keeps the source text of the top-level `bootstrap_room` (`withRoom`
 * false: plain JSON.parse).
 */
export function parseBody(text: string, withRoom = true): ParsedBody {
  if (!withRoom) return { value: JSON.parse(text) };
  const sources: { holder: unknown; source: string }[] = [];
  // Sources of numbers held in arrays, by array (a batch's rooms are one of them).
  const listed = new Map<unknown, string[]>();
  const value = JSON.parse(
    text,
    function (this: unknown, key: string, v: unknown, context?: { source?: string }) {
      if (key === "bootstrap_room" && typeof context?.source === "string") {
        sources.push({ holder: this, source: context.source });
      }
      if (Array.isArray(this) && typeof v === "number" && typeof context?.source === "string") {
        if (!listed.has(this)) listed.set(this, []);
        listed.get(this)![Number(key)] = context.source;
      }
      return v;
    },
  );
  const room = (value as { bootstrap_room?: unknown } | null)?.bootstrap_room;
  const fromList = Array.isArray(room) ? listed.get(room) : undefined;
  const roomSource = fromList && fromList.length === (room as unknown[]).length
    ? `[${fromList.join(",")}]`
    : sources.find((s) => s.holder === value)?.source;
  return { value, roomSource };
}

/** "localhost" and "[::1]" name the same host as "127.0.0.1" for the in-process registry. */
export function normalizeHost(host: string): string {
  const h = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  return h === "localhost" || h === "::1" ? "127.0.0.1" : h;
}

/** An IPv6 literal written without brackets (a host name cannot contain ":"). */
export function isBareIpv6(host: string): boolean {
  return host.includes(":") && !host.startsWith("[");
}

/** vLLM's `X-data-parallel-rank` header: an integer, else none (serving.py `int(rank_str)`). */
export function dataParallelRankHeader(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*\d+\s*$/.test(value)) return undefined;
  return Number(value.trim());
}

export function nixlKey(engineId: string, remoteRequestId: string): string {
  return `vllm-nixl|${engineId}|${remoteRequestId}`;
}

/**
 * `addr` as `http://host:port` (normalized by `parseBootstrapAddr`). The engine id is not part of
 * the key: a decode naming another DP rank's engine than the one the prefill ran on must meet the
 * prefill and be failed by the check, not wait unmatched.
 */
export function mooncakeKey(addr: string, transferId: string): string {
  return `vllm-mooncake|${addr}|${transferId}`;
}

/** `hostPort` as `host:port` (normalized), `room` as its decimal digits. */
export function sglangKey(hostPort: string, room: string): string {
  return `sglang|${hostPort}|${room}`;
}

/** `http://host:port` → the normalized form, or undefined when it is not one. */
export function parseBootstrapAddr(addr: string): string | undefined {
  const match = /^http:\/\/(\[[^\]]+\]|[^:/\s]+):(\d{1,5})\/?$/.exec(addr);
  if (!match) return undefined;
  const port = Number(match[2]);
  if (port < 1 || port > 65535) return undefined;
  return `http://${normalizeHost(match[1])}:${port}`;
}

/** What a validated P/D request asks of the engine. */
export type PdPlan =
  | { protocol: "vllm-nixl"; role: "prefill" }
  | {
    protocol: "vllm-nixl";
    role: "decode";
    remoteEngineId: string;
    remoteRequestId: string;
    params: Record<string, unknown>;
  }
  | { protocol: "vllm-mooncake"; role: "prefill"; transferId: string; dpRank?: number }
  | {
    protocol: "vllm-mooncake";
    role: "decode";
    bootstrapAddr: string;
    remoteEngineId: string;
    transferId: string;
  }
  | { protocol: "sglang"; role: "prefill"; room: string }
  | { protocol: "sglang"; role: "decode"; room: string; bootstrapHostPort: string };

export type PdCheck =
  /** Serve as a P/D request. */
  | { kind: "plan"; plan: PdPlan }
  /** Refuse before any output, as an OpenAI error (the real engine's status where it has one). */
  | { kind: "reject"; status: number; message: string; param: string | null; upstream: boolean }
  /** Non-strict mode: upstream would serve it as an ordinary request (full local prefill). */
  | { kind: "degrade"; reason: string }
  /** Served as an ordinary request in either mode: a proxy sends it so on purpose. */
  | { kind: "plain"; reason: string };

export interface PdCheckInput {
  protocol: PdProtocol;
  role: PdRole;
  body: OpenAiBody;
  /** Request headers, lower-cased names. */
  headers: Record<string, string>;
  roomSource?: string;
  /** Reject what upstream silently degrades (default true in the fake). */
  strict: boolean;
  dataParallelSize: number;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);
const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v);
const nonEmpty = (v: unknown): v is string => typeof v === "string" && v.length > 0;

/** Validates one request on a P/D instance. Pure. */
export function checkPdRequest(input: PdCheckInput): PdCheck {
  const { protocol, role } = input;
  if (protocol === "sglang") return checkSglang(input);
  const { body, strict } = input;
  // vLLM: `kv_transfer_params: dict[str, Any] | None` in the OpenAI protocol; pydantic refuses
  // any other type with 400.
  const params = body.kv_transfer_params;
  if (params !== undefined && params !== null && !isObject(params)) {
    return reject(
      "kv_transfer_params: Input should be a valid dictionary",
      "kv_transfer_params",
      true,
    );
  }
  if (!isObject(params) && role === "decode") {
    // The toy proxy sends the decode the plain body when the prefill answered no params (its
    // one token was EOS or a stop string), and a router prefilling on the decode instance
    // (conditional disaggregation) sends it on purpose: vLLM then prefills locally.
    return {
      kind: "plain",
      reason: "a decode request without kv_transfer_params: vLLM prefills it locally",
    };
  }
  if (!isObject(params)) {
    const reason = "a prefill instance got a request without kv_transfer_params: vLLM serves " +
      "it as an ordinary request and holds no KV for a decode";
    return strict ? reject(`${reason} (fake strict mode)`, "kv_transfer_params") : degrade(reason);
  }
  return role === "prefill" ? checkVllmPrefill(input, params) : checkVllmDecode(input, params);
}

function reject(message: string, param: string | null, upstream = false, status = 400): PdCheck {
  return { kind: "reject", status, message, param, upstream };
}

function degrade(reason: string): PdCheck {
  return { kind: "degrade", reason };
}

/** A rule upstream does not enforce: rejected in strict mode, else served as upstream would. */
function lax(input: PdCheckInput, message: string, param: string, upstreamBehaviour: string) {
  return input.strict
    ? reject(`${message} (fake strict mode; upstream ${upstreamBehaviour})`, param)
    : degrade(`${message}; upstream ${upstreamBehaviour}`);
}

/** The body rules of a vLLM prefill request (toy proxy / mooncake proxy). */
function checkVllmPrefillBody(input: PdCheckInput): PdCheck | undefined {
  const { body } = input;
  if (body.stream_options !== undefined && body.stream_options !== null && body.stream !== true) {
    // vLLM's request validator: "Stream options can only be defined when `stream=True`."
    return reject(
      "Stream options can only be defined when `stream=True`.",
      "stream_options",
      true,
    );
  }
  if (body.stream === true) {
    return lax(
      input,
      "a P/D prefill request must have stream: false (the proxy reads kv_transfer_params from " +
        "the JSON answer)",
      "stream",
      "would stream the answer",
    );
  }
  const present = (["max_tokens", "max_completion_tokens"] as const).filter((f) =>
    body[f] !== undefined && body[f] !== null
  );
  if (present.length === 0 || present.some((f) => body[f] !== 1)) {
    return lax(
      input,
      "a P/D prefill request must set max_tokens: 1 (and max_completion_tokens: 1 when present)",
      present.find((f) => body[f] !== 1) ?? "max_tokens",
      "would generate more tokens on the prefill instance",
    );
  }
  for (const f of ["min_tokens", "min_completion_tokens"] as const) {
    if (isInt(body[f]) && (body[f] as number) > 1) {
      // vLLM SamplingParams: min_tokens must be less than or equal to max_tokens.
      return reject(`${f} must be less than or equal to max_tokens=1, got ${body[f]}.`, f, true);
    }
  }
  return undefined;
}

function checkVllmPrefill(input: PdCheckInput, params: Record<string, unknown>): PdCheck {
  const p = "kv_transfer_params.";
  if (params.do_remote_decode !== true) {
    return lax(
      input,
      `${p}do_remote_decode must be true on a prefill instance`,
      `${p}do_remote_decode`,
      "would hold no KV for a decode",
    );
  }
  if (params.do_remote_prefill !== undefined && params.do_remote_prefill !== false) {
    return lax(
      input,
      `${p}do_remote_prefill must be false on a prefill instance`,
      `${p}do_remote_prefill`,
      "would try to pull KV from another prefill",
    );
  }
  if (input.protocol === "vllm-nixl") {
    for (const f of ["remote_engine_id", "remote_block_ids", "remote_host", "remote_port"]) {
      if (params[f] !== undefined && params[f] !== null) {
        return lax(
          input,
          `${p}${f} must be null on a prefill request`,
          `${p}${f}`,
          "ignores it",
        );
      }
    }
  }
  const bodyProblem = checkVllmPrefillBody(input);
  if (bodyProblem) return bodyProblem;
  if (input.protocol === "vllm-nixl") {
    return { kind: "plan", plan: { protocol: "vllm-nixl", role: "prefill" } };
  }
  if (!nonEmpty(params.transfer_id)) {
    return lax(
      input,
      `${p}transfer_id must be a non-empty string`,
      `${p}transfer_id`,
      `logs "Missing transfer_id in kv_transfer_params from router!" and sends no KV`,
    );
  }
  const rankHeader = input.headers["x-data-parallel-rank"];
  let dpRank: number | undefined;
  if (rankHeader !== undefined) {
    dpRank = /^\d+$/.test(rankHeader.trim()) ? Number(rankHeader.trim()) : NaN;
    if (!(dpRank >= 0 && dpRank < input.dataParallelSize)) {
      return reject(
        `X-data-parallel-rank must be an integer in [0, ${input.dataParallelSize}), got ` +
          JSON.stringify(rankHeader),
        "X-data-parallel-rank",
      );
    }
  }
  return {
    kind: "plan",
    plan: { protocol: "vllm-mooncake", role: "prefill", transferId: params.transfer_id, dpRank },
  };
}

function checkVllmDecode(input: PdCheckInput, params: Record<string, unknown>): PdCheck {
  const p = "kv_transfer_params.";
  if (params.do_remote_prefill !== true) {
    return lax(
      input,
      `${p}do_remote_prefill must be true on a decode instance`,
      `${p}do_remote_prefill`,
      "prefills the prompt locally",
    );
  }
  if (params.do_remote_decode !== undefined && params.do_remote_decode !== false) {
    return reject(`${p}do_remote_decode must be false on a decode request`, `${p}do_remote_decode`);
  }
  const invalid = (field: string, want: string) =>
    lax(
      input,
      `${p}${field} must be ${want}, got ${JSON.stringify(params[field]) ?? "nothing"}`,
      `${p}${field}`,
      `logs "Got invalid KVTransferParams" and prefills locally`,
    );
  if (input.protocol === "vllm-nixl") {
    if (!nonEmpty(params.remote_engine_id)) return invalid("remote_engine_id", "a string");
    if (!nonEmpty(params.remote_request_id)) return invalid("remote_request_id", "a string");
    if (!nonEmpty(params.remote_host)) return invalid("remote_host", "a string");
    if (!isInt(params.remote_port) || params.remote_port < 1 || params.remote_port > 65535) {
      return invalid("remote_port", "an integer port");
    }
    const blocks = params.remote_block_ids;
    const blockList = (v: unknown) => Array.isArray(v) && v.every(isInt);
    if (!Array.isArray(blocks) || !(blockList(blocks) || blocks.every(blockList))) {
      return invalid("remote_block_ids", "a list of block ids (or one list per KV-cache group)");
    }
    if (!isInt(params.tp_size) || params.tp_size < 1) return invalid("tp_size", "an integer");
    return {
      kind: "plan",
      plan: {
        protocol: "vllm-nixl",
        role: "decode",
        remoteEngineId: params.remote_engine_id,
        remoteRequestId: params.remote_request_id,
        params,
      },
    };
  }
  if (
    params.remote_bootstrap_addr === undefined &&
    (params.bootstrap_server_host !== undefined || params.bootstrap_server_port !== undefined)
  ) {
    return invalid(
      "remote_bootstrap_addr",
      'a "http://host:port" string (bootstrap_server_host/_port are older builds\' fields)',
    );
  }
  const addr = typeof params.remote_bootstrap_addr === "string"
    ? parseBootstrapAddr(params.remote_bootstrap_addr)
    : undefined;
  if (!addr) return invalid("remote_bootstrap_addr", 'a "http://host:port" string');
  if (!nonEmpty(params.remote_engine_id)) return invalid("remote_engine_id", "a string");
  if (!nonEmpty(params.transfer_id)) return invalid("transfer_id", "a non-empty string");
  if (
    params.remote_dp_rank !== undefined && params.remote_dp_rank !== null &&
    !(isInt(params.remote_dp_rank) && params.remote_dp_rank >= 0)
  ) {
    return invalid("remote_dp_rank", "a non-negative integer");
  }
  return {
    kind: "plan",
    plan: {
      protocol: "vllm-mooncake",
      role: "decode",
      bootstrapAddr: addr,
      remoteEngineId: params.remote_engine_id,
      transferId: params.transfer_id,
    },
  };
}

/**
 * The items SGLang makes of a body (each prompt of a batch times `n`), whose bootstrap fields it
 * then indexes by item; undefined for a single request. A completions `prompt` list counts as a
 * batch whatever its length, as sgl-router treats it.
 */
export function sglangBatchItems(body: OpenAiBody): number | undefined {
  const prompts = body.prompt ?? body.text ?? body.input_ids;
  const batch = Array.isArray(prompts) &&
    (typeof prompts[0] === "string" || Array.isArray(prompts[0]));
  const sampling = Array.isArray(body.sampling_params)
    ? body.sampling_params[0]
    : body.sampling_params;
  const n = Number(body.n ?? (sampling as { n?: unknown } | undefined)?.n ?? 1);
  if (!batch && !(n > 1)) return undefined;
  return (batch ? (prompts as unknown[]).length : 1) * Math.max(1, n);
}

function checkSglang(input: PdCheckInput): PdCheck {
  const { body } = input;
  const room = body.bootstrap_room;
  if (room === undefined || room === null) {
    // SGLang answers 400 "Disaggregated request received without bootstrap room id" on both
    // roles (older builds: the prefill's scheduler dies on an assertion instead).
    return reject(
      "Disaggregated request received without bootstrap room id",
      "bootstrap_room",
      true,
    );
  }
  const items = sglangBatchItems(body);
  if (items !== undefined) return checkSglangBatch(input, items);
  for (const f of ["bootstrap_host", "bootstrap_port", "bootstrap_room"]) {
    if (Array.isArray(body[f])) {
      return reject(`${f}: a list is for a batch of requests; this request is one (fake)`, f);
    }
  }
  const digits = roomDigits(room, input.roomSource);
  if (typeof digits !== "string") return digits;
  return sglangPlan(input, body.bootstrap_host, body.bootstrap_port, digits);
}

/** A room as exact digits in [0, 2^63 - 1], or the refusal of it. */
function roomDigits(room: unknown, source: string | undefined): string | PdCheck {
  if (typeof room !== "number" || source === undefined || !/^\d+$/.test(source)) {
    // pydantic (lax) would coerce "123" or 12.0; the fake wants a JSON integer.
    return reject(
      `bootstrap_room must be a JSON integer in [0, 2^63 - 1], got ${
        source ?? JSON.stringify(room)
      }`,
      "bootstrap_room",
      typeof room !== "number",
    );
  }
  const digits = BigInt(source).toString();
  if (BigInt(digits) > MAX_BOOTSTRAP_ROOM) {
    return reject(
      `bootstrap_room must be a JSON integer in [0, 2^63 - 1], got ${source}`,
      "bootstrap_room",
    );
  }
  return digits;
}

/**
 * A batch: SGLang reads item i's host, port and room at [i] (GenerateReqInput.__getitem__), so
 * each must be a list with an entry per item, and rooms distinct (each item is a transfer). The
 * fake hands the batch's KV over once, in its first room.
 */
function checkSglangBatch(input: PdCheckInput, items: number): PdCheck {
  const { body } = input;
  for (const f of ["bootstrap_host", "bootstrap_port", "bootstrap_room"]) {
    const value = body[f];
    const required = f === "bootstrap_room" || input.role === "decode";
    if ((value !== undefined || required) && !(Array.isArray(value) && value.length >= items)) {
      return reject(
        `${f}: this request is a batch of ${items} items; SGLang reads the field per item, so ` +
          `it must be a list of ${items} (got ${JSON.stringify(value) ?? "nothing"})`,
        f,
      );
    }
  }
  const rooms = body.bootstrap_room as unknown[];
  const sources = /^\[(.*)\]$/.exec(input.roomSource ?? "")?.[1].split(",") ?? [];
  const digits: string[] = [];
  for (const [i, room] of rooms.entries()) {
    const one = roomDigits(room, sources[i]);
    if (typeof one !== "string") return one;
    digits.push(one);
  }
  if (new Set(digits).size !== digits.length) {
    return reject("bootstrap_room: each item of a batch needs its own room", "bootstrap_room");
  }
  const at0 = (f: string) => (body[f] as unknown[] | undefined)?.[0];
  return sglangPlan(input, at0("bootstrap_host"), at0("bootstrap_port"), digits[0]);
}

/** Host and port of the prefill's bootstrap server checked on a decode; the plan. */
function sglangPlan(input: PdCheckInput, host: unknown, port: unknown, room: string): PdCheck {
  if (host !== undefined && host !== null && typeof host !== "string") {
    return reject("bootstrap_host: Input should be a valid string", "bootstrap_host", true);
  }
  if (port !== undefined && port !== null && !(isInt(port) && port >= 1 && port <= 65535)) {
    return reject("bootstrap_port: Input should be a valid integer port", "bootstrap_port", true);
  }
  if (input.role === "prefill") {
    return { kind: "plan", plan: { protocol: "sglang", role: "prefill", room } };
  }
  if (!nonEmpty(host)) {
    return reject(
      "bootstrap_host is required on a decode request: it names the prefill's bootstrap server " +
        "(fake strict check; upstream fails the transfer)",
      "bootstrap_host",
    );
  }
  if (!isInt(port)) {
    return reject(
      "bootstrap_port is required on a decode request (the prefill's --disaggregation-" +
        "bootstrap-port, default 8998; fake strict check)",
      "bootstrap_port",
    );
  }
  return {
    kind: "plan",
    plan: {
      protocol: "sglang",
      role: "decode",
      room,
      bootstrapHostPort: sglangHostPort(host, port),
    },
  };
}

/**
 * The bootstrap address an SGLang decode reaches. Older builds join `f"{bootstrap_host}:{port}"`
 * and ask `http://{addr}/route` (decode.py, sgl-project/sglang 278e503a): a bare IPv6 host makes
 * "::1:8998", which names no server. The proxies send it in brackets (mini_lb 001c2ae0
 * `maybe_wrap_ipv6_address`; sgl-router worker_builder.rs 9fc56c2e `Url::host_str`).
 */
function sglangHostPort(host: string, port: number): string {
  return isBareIpv6(host) ? `${host}:${port}` : `${normalizeHost(host)}:${port}`;
}

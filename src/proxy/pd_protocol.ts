/**
 * The request bodies of the three prefill/decode protocols (docs/compat.md §7), built from the
 * client's body. Pure: the caller draws rooms and transfer ids and reads the prefill's answer.
 */

/** The P/D protocols the router drives (docs/compat.md §7). */
export type PdProtocol = "vllm-nixl" | "vllm-mooncake" | "sglang";

/** What one pairing of a prefill and a decode instance needs besides the client's body. */
export interface PdPairing {
  protocol: PdProtocol;
  /**
   * The prefill instance's host and KV bootstrap port (vllm-mooncake, sglang). SGLang's is sent as
   * is (an IPv6 literal in brackets); Mooncake's is bare and bracketed in the address.
   */
  bootstrapHost: string;
  bootstrapPort: number;
  /** sglang: the room both sides meet in, as exact decimal digits (it may exceed 2^53). */
  room?: string;
  /**
   * sglang, a body the engine takes as a batch (src/openai/engine_batch.ts): one room per item,
   * as SGLang indexes its bootstrap fields by item (and sgl-router sends them).
   */
  batchRooms?: string[];
  /** vllm-mooncake: the transfer both sides name, and the prefill engine's id (its `/query`). */
  transferId?: string;
  remoteEngineId?: string;
  /** vllm-mooncake: the prefill's data-parallel rank whose engine id the decode names. */
  dpRank?: number;
  /** vllm-nixl: the `kv_transfer_params` of the prefill's answer. */
  prefillParams?: Record<string, unknown>;
}

const NIXL_PREFILL_PARAMS = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

/** The prefill request: one token, not streamed (vLLM), or the client's body (SGLang). */
export function prefillBody(body: Record<string, unknown>, pairing: PdPairing): string {
  if (pairing.protocol === "sglang") return withRoom(body, pairing);
  const copy: Record<string, unknown> = { ...body, stream: false, max_tokens: 1 };
  if ("max_completion_tokens" in copy) copy.max_completion_tokens = 1;
  delete copy.stream_options;
  delete copy.min_tokens;
  delete copy.min_completion_tokens;
  copy.kv_transfer_params = pairing.protocol === "vllm-nixl" ? NIXL_PREFILL_PARAMS : {
    do_remote_decode: true,
    do_remote_prefill: false,
    transfer_id: pairing.transferId,
  };
  return JSON.stringify(copy);
}

/**
 * Headers of the prefill request only: Mooncake pins its DP rank (`X-data-parallel-rank`, as
 * mooncake_connector_proxy.py does, vllm-project/vllm 41c5903d), so that the decode's
 * `remote_engine_id` names the engine that holds the KV.
 */
export function prefillHeaders(pairing: PdPairing): Record<string, string> {
  return pairing.dpRank === undefined ? {} : { "x-data-parallel-rank": String(pairing.dpRank) };
}

/** The decode request: the client's body (stream as asked) plus what joins it to the prefill. */
export function decodeBody(body: Record<string, unknown>, pairing: PdPairing): string {
  switch (pairing.protocol) {
    case "sglang":
      return withRoom(body, pairing);
    case "vllm-nixl":
      return JSON.stringify(
        pairing.prefillParams ? { ...body, kv_transfer_params: pairing.prefillParams } : body,
      );
    case "vllm-mooncake":
      return JSON.stringify({
        ...body,
        kv_transfer_params: {
          do_remote_decode: false,
          do_remote_prefill: true,
          remote_bootstrap_addr: `http://${
            hostForUrl(pairing.bootstrapHost)
          }:${pairing.bootstrapPort}`,
          remote_engine_id: pairing.remoteEngineId,
          transfer_id: pairing.transferId,
        },
      });
  }
}

/**
 * SGLang's three fields, as lists of one per item for a batch; rooms are written as digits (JSON
 * numbers lose precision past 2^53).
 */
function withRoom(body: Record<string, unknown>, pairing: PdPairing): string {
  const { bootstrap_room: _room, ...rest } = body;
  const rooms = pairing.batchRooms;
  const each = <T>(value: T) => rooms ? rooms.map(() => value) : value;
  const text = JSON.stringify({
    ...rest,
    bootstrap_host: each(pairing.bootstrapHost),
    bootstrap_port: each(pairing.bootstrapPort),
  });
  const room = rooms ? `[${rooms.join(",")}]` : pairing.room;
  return `${text.slice(0, -1)},"bootstrap_room":${room}}`;
}

/** A random room in [0, 2^63 − 1] as decimal digits, from 8 random bytes. */
export function bootstrapRoom(bytes: Uint8Array): string {
  let value = 0n;
  for (const byte of bytes.subarray(0, 8)) value = (value << 8n) | BigInt(byte);
  return BigInt.asUintN(63, value).toString();
}

/**
 * The prefill's `kv_transfer_params`, when its answer carries a non-empty object there. Older
 * vLLM answers none when the one token stopped the request (EOS, a stop string); the toy proxy
 * then sends the decode the client's body (`if kv_transfer_params:`, toy_proxy_server.py,
 * vllm-project/vllm 030ea52e), which the decode prefills itself.
 */
export function prefillParamsOf(answer: unknown): Record<string, unknown> | undefined {
  const params = (answer as { kv_transfer_params?: unknown } | null)?.kv_transfer_params;
  const isObject = params && typeof params === "object" && !Array.isArray(params);
  return isObject && Object.keys(params).length > 0 ? params as Record<string, unknown> : undefined;
}

/** One data-parallel rank of a vLLM Mooncake prefill engine. */
export interface DpRank {
  rank: number;
  engineId: string;
}

/**
 * Every rank of a vLLM Mooncake bootstrap server's `/query` answer,
 * `{"<dp_rank>": {"engine_id": "...", "worker_addr": {...}}}` (MooncakeBootstrapServer.query,
 * mooncake_utils.py, vllm-project/vllm e7ad92e5), in rank order; undefined when none is readable.
 */
export function dpRanksOf(query: unknown): DpRank[] | undefined {
  if (!query || typeof query !== "object" || Array.isArray(query)) return undefined;
  const ranks = Object.entries(query as Record<string, { engine_id?: unknown } | null>)
    .filter(([rank, entry]) => /^\d+$/.test(rank) && typeof entry?.engine_id === "string")
    .map(([rank, entry]) => ({ rank: Number(rank), engineId: entry!.engine_id as string }))
    .sort((a, b) => a.rank - b.rank);
  return ranks.length > 0 ? ranks : undefined;
}

function hostForUrl(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

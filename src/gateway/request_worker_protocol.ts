/**
 * Messages between the request worker pool (request_worker_pool.ts) and its workers
 * (request_worker.ts): large request bodies parsed, and long prompts' store keys hashed, off the
 * main loop. Token ids travel as transferred Uint32Arrays (a plain array would be copied one
 * number at a time, slower than parsing it).
 */
import type { ExtraKeys, KeySchemeOptions } from "../hashing/types.ts";
import type { JsonEndpoint } from "../openai/endpoints.ts";

export type RequestJob =
  | {
    kind: "parse";
    endpoint: JsonEndpoint;
    /** Transferred to the worker, and back with its answer (the main loop forwards them). */
    bytes: Uint8Array<ArrayBuffer>;
    /** Each served model name's `limits.maxPromptChars`: an oversized prompt goes no further. */
    maxPromptChars: ReadonlyMap<string, number>;
  }
  | { kind: "hash"; scheme: KeySchemeOptions; tokens: Uint32Array; extra?: ExtraKeys };

/** A parse the body failed: the request's 400 (or 413), rebuilt as an HttpError on the main loop. */
export interface ParseRefusal {
  status: number;
  message: string;
  param?: string;
  code: string;
  /** The model the body names (so the refusal is counted under it). */
  model?: string;
}

export type RequestJobResult =
  | {
    kind: "parsed";
    bytes: Uint8Array<ArrayBuffer>;
    /** The ParsedRequest, with a token-id prompt (and its copy in `body`) left out... */
    parsed: unknown;
    /** ... and sent here instead: one array per prompt... */
    tokens?: Uint32Array[];
    /** ... and whether the body held a list of them (a batch) or one. */
    tokenBatch?: boolean;
  }
  | { kind: "refused"; refusal: ParseRefusal; bytes: Uint8Array<ArrayBuffer> }
  | { kind: "hashed"; blockHashes: string[]; chunkKeys: string[][] };

export type ToRequestWorker = { id: number; job: RequestJob };

/**
 * `ready` first, once the worker's modules are evaluated: messages sent before that (the hashing
 * modules await their WASM at load) would find no handler and be lost.
 */
export type FromRequestWorker =
  | { ready: true }
  | { id: number; ok: true; result: RequestJobResult }
  /** A job that failed; a parse job's body comes back with it. */
  | { id: number; ok: false; message: string; bytes?: Uint8Array<ArrayBuffer> };

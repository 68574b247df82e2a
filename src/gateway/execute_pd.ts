/**
 * Drives one disaggregated request through its engines' P/D protocol (docs/compat.md §7):
 *   vllm-nixl      serial: the prefill answers one token and its `kv_transfer_params`, which the
 *                  decode request then carries;
 *   vllm-mooncake  concurrent: both at once, paired by a transfer id and the prefill's bootstrap
 *                  server;
 *   sglang         concurrent: the same body to both, paired by a bootstrap room.
 * A prefill that fails before answering is retried on the next-best prefill instance; a decode
 * that fails before its first byte on the next-best decode instance, with a new prefill (every
 * hand-over is single-use); a Mooncake decode whose prefill engine has new ids (restarted) first
 * once more on the same pair. A client that leaves cancels both legs. Leases: prompt tokens on the
 * prefill instance until its answer, a decode slot until the stream ends; each released once.
 */
import { engineBatchSize } from "../openai/engine_batch.ts";
import { HttpError } from "../openai/errors.ts";
import {
  type ForwardOutcome,
  type ForwardTarget,
  forwardWithRetries,
  readBodyText,
} from "../proxy/forward.ts";
import {
  bootstrapRoom,
  decodeBody,
  type PdPairing,
  prefillBody,
  prefillHeaders,
  prefillParamsOf,
} from "../proxy/pd_protocol.ts";
import { AttemptLeases } from "./attempt_leases.ts";
import { clientGone, type ExecuteOptions, fail, finishOnce } from "./execution.ts";
import { observePrefill, relayResponse } from "./relay_response.ts";
import type { Reservation } from "./reservation.ts";

export interface PdExecuteOptions extends ExecuteOptions {
  /** The client's decoded body, from which each leg's body is built. */
  requestBody: Record<string, unknown>;
}

/** The leases of one pairing's two legs (an instance may be tried again in a later pairing). */
interface Legs {
  prefill: AttemptLeases;
  decode: AttemptLeases;
}

/** How one pairing ended: the decode's answer, a final answer, or "try the next decode". */
type PairResult =
  | {
    kind: "response";
    response: Response;
    prefill: ForwardTarget;
    decode: ForwardTarget;
    legs: Legs;
  }
  | { kind: "final"; response: Response }
  | { kind: "next"; error: string };

/** The largest prefill answer read (one token plus `kv_transfer_params`). */
const PREFILL_ANSWER_MAX_BYTES = 1 << 20;

export async function executePd(options: PdExecuteOptions): Promise<Response> {
  const run = new PdRun(options);
  try {
    return await run.execute();
  } finally {
    run.settle();
  }
}

class PdRun {
  readonly #options: PdExecuteOptions;
  readonly #headers: Headers;
  readonly #abort = new AbortController();
  readonly #signal: AbortSignal;
  readonly #prefillTargets: ForwardTarget[];
  readonly #decodeTargets: ForwardTarget[];

  constructor(options: PdExecuteOptions) {
    this.#options = options;
    const { plan } = options;
    this.#headers = options.upstreamHeaders;
    this.#headers.set("x-request-id", options.record.requestId);
    this.#headers.set("content-type", "application/json");
    this.#headers.delete("content-length"); // each leg's body is its own
    this.#signal = options.clientSignal
      ? AbortSignal.any([options.clientSignal, this.#abort.signal])
      : this.#abort.signal;
    const byRole = (ids: readonly string[], role: string) =>
      ids.flatMap((id) => {
        const entry = plan.entries.get(id);
        return entry?.config.role === role ? [{ id, url: entry.config.url }] : [];
      });
    this.#prefillTargets = byRole(plan.decision.ranking, "prefill");
    this.#decodeTargets = byRole(plan.decode!.decision.ranking, "decode");
  }

  async execute(): Promise<Response> {
    const { record, plan } = this.#options;
    if (this.#prefillTargets.length === 0 || this.#decodeTargets.length === 0) {
      record.outcome = "no_instance";
      const side = this.#prefillTargets.length === 0 ? "prefill" : "decode";
      return fail(
        this.#options,
        new HttpError(503, `No healthy ${side} instance of model '${record.model}' is available`, {
          code: "no_healthy_instance",
        }),
      );
    }
    const errors: string[] = [];
    const budget = 1 + this.#options.maxRetries;
    for (const decode of this.#decodeTargets.slice(0, budget)) {
      const result = plan.decode!.protocol === "vllm-nixl"
        ? await this.#serial(decode)
        : await this.#concurrent(decode);
      if (result.kind === "final") return result.response;
      if (result.kind === "response") return this.#relay(result);
      errors.push(`${decode.id}: ${result.error}`);
    }
    record.outcome = "upstream_failed";
    return fail(
      this.#options,
      new HttpError(502, `All ${errors.length} decode attempt(s) failed (${errors.join("; ")})`, {
        code: "upstream_unavailable",
      }),
    );
  }

  /** Fresh leases for a pairing; the reservations go to the first attempt on their instance. */
  #legs(): Legs {
    const { runtime, plan, now, trace } = this.#options;
    const leases = (reservation: Reservation | undefined, leg: "prefill" | "decode") =>
      new AttemptLeases(runtime, plan, reservation, new Headers(this.#headers), now, trace, leg);
    return {
      prefill: leases(this.#options.reservation, "prefill"),
      decode: leases(this.#options.decodeReservation, "decode"),
    };
  }

  /**
   * Gives back whatever reservation no attempt took. Without a concurrent pair still streaming
   * (whose drained prefill ends it), it also ends the request's expected arrival on its decode
   * instance: a pair whose prefill failed never arrives, and a joiner left behind would count
   * against that instance's batch for good.
   */
  settle(): void {
    this.#options.reservation?.cancel();
    this.#options.decodeReservation?.cancel();
    if (!this.#prefillDraining) this.#options.decodeReservation?.arrived();
  }

  /** A concurrent pair's decode answer is relayed while its prefill is still read. */
  #prefillDraining = false;

  /** NIXL: the prefill's answer first, then the decode carrying its `kv_transfer_params`. */
  async #serial(decode: ForwardTarget): Promise<PairResult> {
    const pairing: PdPairing = { protocol: "vllm-nixl", bootstrapHost: "", bootstrapPort: 0 };
    const started = this.#options.now();
    const legs = this.#legs();
    const prefill = await this.#forward(
      this.#prefillTargets,
      prefillBody(this.#options.requestBody, pairing),
      legs.prefill,
      this.#signal,
    );
    if (prefill.kind !== "response") return { kind: "final", response: this.#legFailed(prefill) };
    const target = prefill.target;
    if (prefill.response.status >= 400) {
      return this.#prefillVerdict(prefill.response, target, legs);
    }
    const answer = await readBodyText(prefill.response, {
      maxBytes: PREFILL_ANSWER_MAX_BYTES,
      timeoutMs: this.#options.headersTimeoutMs,
      signal: this.#signal,
    });
    this.#prefillDone(legs, target.id, started, answer.complete);
    if (this.#signal.aborted) return { kind: "final", response: clientGone(this.#options) };
    const parsed = answer.complete ? parseJson(answer.text) : undefined;
    if (parsed === undefined) {
      return { kind: "next", error: `prefill ${target.id} gave no readable answer` };
    }
    // No params (the one token stopped the request): the decode gets the client's body and
    // prefills it itself, as the toy proxy does.
    pairing.prefillParams = prefillParamsOf(parsed);
    return this.#decodeOnly(decode, decodeBody(this.#options.requestBody, pairing), target, legs);
  }

  /** One decode attempt on `decode`; its prefill (on `prefill`) is done or under way. */
  async #decodeOnly(
    decode: ForwardTarget,
    body: string,
    prefill: ForwardTarget,
    legs: Legs,
    signal = this.#signal,
  ): Promise<PairResult> {
    const outcome = await this.#forward([decode], body, legs.decode, signal);
    if (outcome.kind === "response") {
      return { kind: "response", response: outcome.response, prefill, decode, legs };
    }
    if (outcome.kind === "client_gone" && this.#options.clientSignal?.aborted) {
      return { kind: "final", response: clientGone(this.#options) };
    }
    const last = outcome.attempts.at(-1);
    return { kind: "next", error: last?.error ?? last?.failure ?? "aborted" };
  }

  /**
   * Mooncake and SGLang: prefill and decode at once. A prefill that fails first cancels the
   * decode and the pair is retried with the next prefill instance.
   */
  async #concurrent(decode: ForwardTarget): Promise<PairResult> {
    const budget = 1 + this.#options.maxRetries;
    let error = "no prefill instance could pair";
    for (const prefill of this.#prefillTargets.slice(0, budget)) {
      const result = await this.#pairWith(prefill, decode);
      if (result.kind !== "next" || !result.error.startsWith("prefill")) return result;
      error = result.error;
    }
    return { kind: "next", error };
  }

  /**
   * One pair of `prefill` and `decode`. Mooncake: a decode that failed on engine ids the
   * prefill's `/query` no longer lists (it restarted) is tried once more with the new ones.
   */
  async #pairWith(prefill: ForwardTarget, decode: ForwardTarget): Promise<PairResult> {
    const pairing = await this.#pairing(prefill);
    if (!pairing) {
      return { kind: "next", error: `prefill ${prefill.id} has no readable bootstrap server` };
    }
    const result = await this.#pair(prefill, decode, pairing, this.#legs());
    if (result.kind !== "next" || !(await this.#staleEngineId(pairing, result.error))) {
      return result;
    }
    const fresh = await this.#pairing(prefill);
    return fresh ? await this.#pair(prefill, decode, fresh, this.#legs()) : result;
  }

  /**
   * After a failed Mooncake pair: its bootstrap server is asked again (a failed prefill may come
   * back restarted, with new ids); true when the decode failed on an engine id no longer listed.
   */
  async #staleEngineId(pairing: PdPairing, error: string): Promise<boolean> {
    const ids = this.#options.runtime.bootstrapIds;
    if (pairing.protocol !== "vllm-mooncake" || !ids) return false;
    ids.forget(pairing.bootstrapHost, pairing.bootstrapPort);
    if (error.startsWith("prefill")) return false;
    const ranks = await ids.ranks(pairing.bootstrapHost, pairing.bootstrapPort);
    return ranks !== undefined && !ranks.some((r) => r.engineId === pairing.remoteEngineId);
  }

  async #pair(
    prefill: ForwardTarget,
    decode: ForwardTarget,
    pairing: PdPairing,
    legs: Legs,
  ): Promise<PairResult> {
    const pairAbort = new AbortController();
    const signal = AbortSignal.any([this.#signal, pairAbort.signal]);
    const body = this.#options.requestBody;
    const started = this.#options.now();
    for (const [name, value] of Object.entries(prefillHeaders(pairing))) {
      legs.prefill.upstreamHeaders.set(name, value);
    }
    const prefillRun = this.#forward([prefill], prefillBody(body, pairing), legs.prefill, signal);
    const decodeRun = this.#decodeOnly(decode, decodeBody(body, pairing), prefill, legs, signal);
    const prefillFailed = prefillRun.then((o) =>
      o.kind === "response" && o.response.status < 400 ? new Promise<never>(() => {}) : o
    );
    const first = await Promise.race([decodeRun, prefillFailed]);
    if ("attempts" in first) {
      // The prefill failed (or refused the request) before the decode answered.
      pairAbort.abort();
      await decodeRun;
      if (first.kind === "response") return this.#prefillVerdict(first.response, prefill, legs);
      if (this.#options.clientSignal?.aborted) {
        return { kind: "final", response: clientGone(this.#options) };
      }
      const last = first.attempts.at(-1);
      return { kind: "next", error: `prefill ${prefill.id}: ${last?.error ?? last?.failure}` };
    }
    if (first.kind !== "response") pairAbort.abort(); // no decode to feed: the prefill stops too
    else this.#prefillDraining = true;
    this.#drainPrefill(prefillRun, prefill, started, signal, legs);
    if (first.kind === "response") this.#pairAborts.set(first.response, pairAbort);
    return first;
  }

  readonly #pairAborts = new WeakMap<Response, AbortController>();

  /**
   * The concurrent prefill's answer is read and dropped; its lease ends with it, or when the pair
   * is aborted (its decode failed, or the stream it fed ended).
   */
  #drainPrefill(
    run: Promise<ForwardOutcome>,
    prefill: ForwardTarget,
    started: number,
    signal: AbortSignal,
    legs: Legs,
  ): void {
    // However the prefill ends, the request is no longer expected on its decode instance.
    const arrived = () => this.#options.decodeReservation?.arrived();
    run.then(async (outcome) => {
      if (outcome.kind !== "response") return arrived();
      const read = await readBodyText(outcome.response, {
        maxBytes: PREFILL_ANSWER_MAX_BYTES,
        timeoutMs: this.#options.headersTimeoutMs,
        signal,
      });
      this.#prefillDone(legs, prefill.id, started, read.complete);
    }).catch(() => {
      legs.prefill.release(prefill.id);
      arrived();
    });
  }

  /** The pairing of a concurrent protocol with this prefill instance (undefined: cannot pair). */
  async #pairing(prefill: ForwardTarget): Promise<PdPairing | undefined> {
    const entry = this.#options.plan.entries.get(prefill.id);
    // WHATWG URL: an IPv6 host in brackets, as mini_lb (`maybe_wrap_ipv6_address`, sglang
    // 001c2ae0) and sgl-router (`Url::host_str`, worker_builder.rs 9fc56c2e) send it; older SGLang
    // builds `host:port` from it and would fail on a bare "::1".
    const urlHost = new URL(prefill.url).hostname;
    const port = entry?.config.bootstrapPort ?? 8998;
    const protocol = this.#options.plan.decode!.protocol;
    if (protocol === "sglang") {
      const draw = () => bootstrapRoom(crypto.getRandomValues(new Uint8Array(8)));
      const items = engineBatchSize(this.#options.requestBody);
      const batchRooms = items === undefined ? undefined : Array.from({ length: items }, draw);
      const room = batchRooms?.[0] ?? draw();
      return { protocol, bootstrapHost: urlHost, bootstrapPort: port, room, batchRooms };
    }
    const host = urlHost.replace(/^\[|\]$/g, "");
    const rank = await this.#options.runtime.bootstrapIds?.pick(prefill.url, host, port);
    if (!rank) return undefined;
    const transferId = `xfer-${this.#options.record.requestId}-${crypto.randomUUID().slice(0, 8)}`;
    return {
      protocol,
      bootstrapHost: host,
      bootstrapPort: port,
      remoteEngineId: rank.engineId,
      dpRank: rank.rank,
      transferId,
    };
  }

  #forward(
    targets: ForwardTarget[],
    body: string,
    leases: AttemptLeases,
    signal: AbortSignal,
  ): Promise<ForwardOutcome> {
    return forwardWithRetries(
      {
        method: "POST",
        path: this.#options.path,
        headers: leases.upstreamHeaders,
        body: new TextEncoder().encode(body),
        targets,
        maxAttempts: 1 + this.#options.maxRetries,
        headersTimeoutMs: this.#options.headersTimeoutMs,
        signal,
      },
      { fetch: leases.tracedFetch(this.#options.fetch), now: this.#options.now },
      leases.hooks(),
    ).then((outcome) => {
      this.#options.record.attempts.push(...outcome.attempts);
      return outcome;
    });
  }

  /** The prefill leg is over: its lease goes, the request joins its decode instance. */
  #prefillDone(legs: Legs, prefillId: string, started: number, answered: boolean): void {
    legs.prefill.held(prefillId)?.lease.firstToken();
    legs.prefill.release(prefillId);
    this.#options.decodeReservation?.arrived();
    if (answered && this.#options.plan.decode!.protocol === "vllm-nixl") {
      observePrefill(
        this.#options.runtime,
        this.#options.plan,
        prefillId,
        (this.#options.now() - started) / 1000,
      );
    }
  }

  /** Every prefill attempt failed, or the client left: the request's final answer. */
  #legFailed(outcome: Exclude<ForwardOutcome, { kind: "response" }>): Response {
    if (outcome.kind === "client_gone") return clientGone(this.#options);
    const timedOut = outcome.status === 504;
    this.#options.record.outcome = timedOut ? "upstream_timeout" : "upstream_failed";
    return fail(
      this.#options,
      new HttpError(outcome.status, `Prefill: ${outcome.message}`, {
        code: timedOut ? "upstream_timeout" : "upstream_unavailable",
      }),
    );
  }

  /** A prefill's 4xx is the engine's verdict on the request: the client gets it as is. */
  #prefillVerdict(response: Response, prefill: ForwardTarget, legs: Legs): PairResult {
    this.#options.decodeReservation?.cancel();
    return {
      kind: "final",
      response: relayResponse({
        ...this.#options,
        target: prefill,
        response,
        leases: legs.prefill,
        finishOnce: () => finishOnce(this.#options),
      }),
    };
  }

  #relay(result: Extract<PairResult, { kind: "response" }>): Response {
    const { record, now, runtime } = this.#options;
    const pairAbort = this.#pairAborts.get(result.response);
    return relayResponse({
      ...this.#options,
      target: result.decode,
      response: result.response,
      leases: result.legs.decode,
      finishOnce: () => finishOnce(this.#options),
      prefillInstanceId: result.prefill.id,
      onEnd: (end) => {
        pairAbort?.abort(); // a prefill still running for this stream has no one to serve
        if (end !== "completed" || record.ttftS === undefined) return;
        runtime.decodeOutlook?.observeDecode((now() - record.startedAt) / 1000 - record.ttftS);
      },
    });
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * executeDispatch with an injected fetch: retries down the ranking, the answers when every
 * attempt fails or none can be made, client aborts, and the lease of each attempt released
 * exactly once however the request ends.
 */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import type { LoadLease } from "../../src/cluster/load_account.ts";
import { resolveConfig } from "../../src/config/load.ts";
import type { RequestRecord } from "../../src/contracts.ts";
import { planDispatch } from "../../src/gateway/dispatch_plan.ts";
import { executeDispatch, type ExecuteOptions } from "../../src/gateway/execute_dispatch.ts";
import { ModelRuntime } from "../../src/runtime/model_runtime.ts";
import { range } from "../support/harness.ts";

const IDS = ["e0", "e1", "e2"];
const PROMPT = range(0, 64);

/** Three instances at http://eN:8000 (kvHost 10.0.0.N+1), least_load, no store, no tokenizer. */
async function runtimeOf(): Promise<ModelRuntime> {
  const config = resolveConfig({
    models: [{
      name: "m",
      tokenizer: { mode: "none" },
      kv: { store: "none", chunkSize: 16, minPromptTokens: 0 },
      policy: "least_load",
      instances: IDS.map((id, i) => ({ id, url: `http://${id}:8000`, kvHost: `10.0.0.${i + 1}` })),
    }],
  });
  return await ModelRuntime.create(config.models[0], {
    fetch: () => Promise.reject(new Error("the cluster does not fetch in these tests")),
    now: () => performance.now(),
    random: () => 0,
    log: () => {},
  });
}

/** Every lease the account hands out, with how many times `release()` was called on it. */
function spyOnLeases(runtime: ModelRuntime): { lease: LoadLease; releases: number }[] {
  const account = runtime.cluster.account;
  const lease = account.lease.bind(account);
  const leases: { lease: LoadLease; releases: number }[] = [];
  account.lease = (instanceId, prefillTokens, options) => {
    const inner = lease(instanceId, prefillTokens, options);
    const entry = { lease: inner, releases: 0 };
    leases.push(entry);
    entry.lease = {
      instanceId: inner.instanceId,
      prefillTokens: inner.prefillTokens,
      sequences: inner.sequences,
      firstToken: () => inner.firstToken(),
      release: () => {
        entry.releases++;
        inner.release();
      },
      get released() {
        return inner.released;
      },
    };
    return entry.lease;
  };
  return leases;
}

function newRecord(): RequestRecord {
  return {
    requestId: "req-1",
    model: "m",
    endpoint: "completions",
    arm: "default",
    stream: false,
    startedAt: performance.now(),
    startedAtWallMs: Date.now(),
    attempts: [],
    status: 0,
    outcome: "ok",
    interTokenS: [],
    usage: {},
  };
}

/** Which instance a URL is for (`http://e1:8000/v1/completions` → e1). */
function instanceOf(input: string | URL | Request): string {
  return new URL(input instanceof Request ? input.url : String(input)).hostname;
}

/** Plans PROMPT on a fresh runtime and runs executeDispatch with `fetch` and `overrides`. */
async function dispatch(
  fetch: typeof globalThis.fetch,
  overrides: Partial<ExecuteOptions> = {},
  prepare: (runtime: ModelRuntime) => void = () => {},
) {
  const runtime = await runtimeOf();
  const leases = spyOnLeases(runtime);
  prepare(runtime);
  const { plan, reservation } = await planDispatch(
    runtime,
    {
      endpoint: "completions",
      model: "m",
      stream: false,
      prompt: { kind: "tokens", tokens: PROMPT, extraPromptCount: 0 },
      body: { model: "m", prompt: PROMPT },
    },
    { now: () => performance.now(), random: () => 0, policy: runtime.defaultPolicy },
  );
  assert(reservation, "the plan reserved its first choice");
  const record = overrides.record ?? newRecord();
  const finished: RequestRecord[] = [];
  const options: ExecuteOptions = {
    runtime,
    plan,
    reservation,
    path: "/v1/completions",
    upstreamHeaders: new Headers({ "content-type": "application/json" }),
    body: new TextEncoder().encode(JSON.stringify({ model: "m", prompt: PROMPT })),
    fetch,
    now: () => performance.now(),
    maxRetries: 2,
    headersTimeoutMs: 10_000,
    responseHeaders: new Headers({ "x-request-id": "req-1" }),
    finish: (r) => finished.push(r),
    ...overrides,
    record,
  };
  const response = await executeDispatch(options);
  return { runtime, plan, reservation, record, finished, leases, response };
}

function idle(runtime: ModelRuntime, id: string): boolean {
  const load = runtime.cluster.account.load(id);
  return load.prefillRequests === 0 && load.decodeRequests === 0 && load.prefillTokens === 0;
}

function okCompletion(): Response {
  return Response.json({
    object: "text_completion",
    choices: [{ index: 0, text: "hi", finish_reason: "stop" }],
    usage: { prompt_tokens: 64, completion_tokens: 1, total_tokens: 65 },
  });
}

Deno.test("executeDispatch: a refused first target is retried on the next; the failed attempt's lease is released once", async () => {
  const sent: string[] = [];
  const { runtime, record, finished, leases, response } = await dispatch((input) => {
    const id = instanceOf(input);
    sent.push(id);
    return id === "e0"
      ? Promise.reject(new TypeError("error sending request: Connection refused (os error 111)"))
      : Promise.resolve(okCompletion());
  });
  assertEquals(sent, ["e0", "e1"]);
  assertEquals(response.status, 200);
  assertEquals(response.headers.get("x-tidegate-instance"), "e1");
  assertEquals(record.attempts.map((a) => [a.instanceId, a.failure]), [
    ["e0", "connect_error"],
    ["e1", undefined],
  ]);
  // e0's lease is the reservation's, handed to its attempt and given back when it failed.
  const onE0 = leases.filter((l) => l.lease.instanceId === "e0");
  assertEquals(onE0.map((l) => l.releases), [1], "one lease on e0, released exactly once");
  assert(idle(runtime, "e0"), "e0 carries no load");
  assertEquals(runtime.cluster.get("e0")!.breaker.snapshot().consecutiveFailures, 1);
  // e0 will not write the prompt's KV any more; e1 will.
  const predicted = runtime.predicted!.peek(runtime.keyScheme.keys(PROMPT)[0]);
  assertEquals(predicted?.memoryHosts, ["10.0.0.2"]);

  const onE1 = leases.filter((l) => l.lease.instanceId === "e1");
  assertEquals(onE1.map((l) => l.releases), [0], "e1's lease is held while its body streams");
  await response.text();
  assertEquals(onE1.map((l) => l.releases), [1]);
  assert(idle(runtime, "e1"));
  assertEquals(finished.length, 1);
  assertEquals(record.outcome, "ok");
  assertEquals(leases.length, 2, "no other lease was taken");
});

Deno.test("executeDispatch: a 5xx from every target answers 502 with the engine's own message", async () => {
  const sent: string[] = [];
  const { runtime, record, finished, leases, response } = await dispatch((input) => {
    const id = instanceOf(input);
    sent.push(id);
    return Promise.resolve(
      Response.json(
        { error: { message: `CUDA out of memory on ${id}`, type: "InternalServerError" } },
        { status: 500 },
      ),
    );
  });
  assertEquals(sent, IDS, "three attempts: the first try and maxRetries 2");
  assertEquals(response.status, 502);
  assertEquals(response.headers.get("x-request-id"), "req-1");
  const { error } = await response.json();
  assertEquals(error.code, "upstream_unavailable");
  for (const id of IDS) {
    assertMatch(error.message, new RegExp(`${id}: HTTP 500: CUDA out of memory on ${id}`));
  }
  assertEquals(record.outcome, "upstream_failed");
  assertEquals(record.status, 502);
  assertEquals(finished.length, 1);
  assertEquals(leases.map((l) => l.releases), [1, 1, 1]);
  for (const id of IDS) assert(idle(runtime, id), id);
  assertEquals(runtime.predicted!.size, 0, "no instance will write the prompt's KV");
});

Deno.test("executeDispatch: no target left (every ranked instance removed) answers 503 and cancels the reservation", async () => {
  let calls = 0;
  const runtime = await runtimeOf();
  const { plan, reservation } = await planDispatch(
    runtime,
    {
      endpoint: "completions",
      model: "m",
      stream: false,
      prompt: { kind: "tokens", tokens: PROMPT, extraPromptCount: 0 },
      body: {},
    },
    { now: () => performance.now(), random: () => 0, policy: runtime.defaultPolicy },
  );
  assert(reservation);
  assertEquals(runtime.cluster.account.load("e0").prefillTokens, 64, "reserved before dispatch");
  assert(runtime.predicted!.size > 0);
  const record = newRecord();
  const finished: RequestRecord[] = [];
  const response = await executeDispatch({
    runtime,
    plan: { ...plan, entries: new Map() },
    reservation,
    record,
    path: "/v1/completions",
    upstreamHeaders: new Headers(),
    body: new Uint8Array(2),
    fetch: () => {
      calls++;
      return Promise.resolve(okCompletion());
    },
    now: () => performance.now(),
    maxRetries: 2,
    headersTimeoutMs: 10_000,
    responseHeaders: new Headers(),
    finish: (r) => finished.push(r),
  });
  assertEquals(response.status, 503);
  const { error } = await response.json();
  assertEquals(error.code, "no_healthy_instance");
  assertEquals(calls, 0);
  assertEquals(record.outcome, "no_instance");
  assertEquals(finished.length, 1);
  assert(idle(runtime, "e0"), "the reserved load was given back");
  assertEquals(runtime.predicted!.size, 0, "and the predicted KV writes forgotten");
  assertEquals(reservation.take(), undefined, "the reservation is spent");
});

Deno.test("executeDispatch: the client leaving before headers answers 499 and releases every lease", async () => {
  const client = new AbortController();
  const sent: string[] = [];
  const { runtime, record, finished, leases, response } = await dispatch(
    (input, init) => {
      const id = instanceOf(input);
      sent.push(id);
      if (id === "e0") return Promise.resolve(new Response("overloaded", { status: 503 }));
      // e1 never answers: the client gives up while waiting for its headers.
      queueMicrotask(() => client.abort(new Error("client went away")));
      return new Promise((_, reject) => {
        init?.signal?.addEventListener("abort", () => reject(init.signal!.reason));
      });
    },
    { clientSignal: client.signal },
  );
  assertEquals(sent, ["e0", "e1"]);
  assertEquals(response.status, 499);
  assertEquals(record.outcome, "client_aborted");
  assertEquals(record.status, 499);
  assertEquals(finished.length, 1);
  assertEquals(leases.map((l) => [l.lease.instanceId, l.releases]), [["e0", 1], ["e1", 1]]);
  for (const id of IDS) assert(idle(runtime, id), id);
  const e1 = runtime.cluster.get("e1")!.breaker.snapshot();
  assertEquals(e1.consecutiveFailures, 0, "leaving is not the instance's failure");
  assertEquals(runtime.cluster.get("e1")!.active, 0);
});

Deno.test("executeDispatch: a streamed answer holds its lease until the body is read, then finishes once", async () => {
  const events = [
    { choices: [{ index: 0, text: "Hel" }] },
    { choices: [{ index: 0, text: "lo" }] },
    {
      choices: [],
      usage: {
        prompt_tokens: 64,
        completion_tokens: 2,
        prompt_tokens_details: { cached_tokens: 32 },
      },
    },
  ];
  const frames = [...events.map((e) => `data: ${JSON.stringify(e)}\n\n`), "data: [DONE]\n\n"];
  const sse = frames.join("");
  const encoder = new TextEncoder();
  const { runtime, record, finished, leases, response } = await dispatch(() => {
    // Each event cut in two: it spans chunks, and completes in a chunk of its own.
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const frame of frames) {
          const half = Math.floor(frame.length / 2);
          controller.enqueue(encoder.encode(frame.slice(0, half)));
          controller.enqueue(encoder.encode(frame.slice(half)));
        }
        controller.close();
      },
    });
    return Promise.resolve(
      new Response(body, { headers: { "content-type": "text/event-stream" } }),
    );
  }, { record: { ...newRecord(), stream: true } });
  assertEquals(response.status, 200);
  assertEquals(response.headers.get("content-type"), "text/event-stream");
  assertEquals(leases.map((l) => l.releases), [0], "held while the body streams");
  assertEquals(finished.length, 0, "not finished before the last byte");
  assertEquals(runtime.cluster.get("e0")!.active, 1);

  assertEquals(await response.text(), sse, "the body passes through unchanged");
  assertEquals(leases.map((l) => l.releases), [1]);
  assert(idle(runtime, "e0"));
  assertEquals(runtime.cluster.get("e0")!.active, 0);
  assertEquals(finished.length, 1);
  assertEquals(finished[0], record);
  assertEquals(record.outcome, "ok");
  assertEquals(record.instanceId, "e0");
  assertEquals(record.usage, { promptTokens: 64, completionTokens: 2, cachedTokens: 32 });
  assert(record.ttftS !== undefined && record.ttftS >= 0, "a stream has a TTFT");
  assertEquals(record.interTokenS.length, 2, "three data events: two gaps");
  assert(record.durationS !== undefined);
});

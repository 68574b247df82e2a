/**
 * planDispatch on a real ModelRuntime: what it tokenizes, when it asks the store, how store hits
 * reach the candidates, and the reservation it takes on the first choice.
 */
import { assert, assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { type PlanContext, planDispatch, promptTokensOf } from "../../src/gateway/dispatch_plan.ts";
import { ModelRuntime, type RuntimeDeps } from "../../src/runtime/model_runtime.ts";
import type { ParsedRequest } from "../../src/openai/request.ts";
import type { NamedPolicy } from "../../src/scheduling/named_policy.ts";
import { resolveTtftParams } from "../../src/scheduling/registry.ts";
import type { Candidate, ScheduleRequest } from "../../src/scheduling/types.ts";
import {
  type FakeMooncakeMaster,
  startFakeMooncakeMaster,
} from "../../src/fakes/fake_mooncake_master.ts";
import type { Reservation } from "../../src/gateway/reservation.ts";
import { range } from "../support/harness.ts";

const CHUNK = 16;
const KV_HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];

/** A model with three instances (kvHost 10.0.0.{i+1}), merged with `extra`. */
function model(extra: Record<string, unknown> = {}, kv: Record<string, unknown> = {}) {
  return {
    name: "m",
    tokenizer: { mode: "none" },
    kv: { store: "none", chunkSize: CHUNK, minPromptTokens: 0, ...kv },
    policy: "least_load",
    instances: KV_HOSTS.map((kvHost, i) => ({ id: `e${i}`, url: `http://e${i}:8000`, kvHost })),
    ...extra,
  };
}

async function runtimeOf(
  modelConfig: Record<string, unknown>,
  deps: Partial<RuntimeDeps> = {},
): Promise<ModelRuntime> {
  const config = resolveConfig({ models: [modelConfig] });
  return await ModelRuntime.create(config.models[0], {
    fetch: () => Promise.reject(new Error("no network in this test")),
    now: () => performance.now(),
    random: () => 0,
    log: () => {},
    ...deps,
  });
}

function context(runtime: ModelRuntime, policy: NamedPolicy = runtime.defaultPolicy): PlanContext {
  return { now: () => performance.now(), random: () => 0, policy };
}

function tokensRequest(tokens: number[]): ParsedRequest {
  return {
    endpoint: "completions",
    model: "m",
    stream: false,
    prompt: { kind: "tokens", tokens, extraPromptCount: 0 },
    body: { model: "m", prompt: tokens },
  };
}

function textRequest(text: string): ParsedRequest {
  return {
    endpoint: "completions",
    model: "m",
    stream: false,
    prompt: { kind: "text", text, extraPromptCount: 0 },
    body: { model: "m", prompt: text },
  };
}

function candidate(candidates: Candidate[], id: string): Candidate {
  const found = candidates.find((c) => c.id === id);
  assert(found, `candidate ${id}`);
  return found;
}

/** An engine-mode tokenizer's fetch: answers `/tokenize` with one id per character, counting. */
function countingTokenizeFetch() {
  const calls: string[] = [];
  const fetch: typeof globalThis.fetch = (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    calls.push(url.pathname);
    if (url.pathname !== "/tokenize") {
      return Promise.resolve(new Response("not found", { status: 404 }));
    }
    const body = JSON.parse(String(init?.body));
    const tokens = [...String(body.prompt)].map((c) => c.charCodeAt(0));
    return Promise.resolve(Response.json({ tokens, count: tokens.length, max_model_len: 4096 }));
  };
  return { calls, fetch };
}

Deno.test("planDispatch: a token-id prompt is used as it is, without asking the tokenizer", async () => {
  const tokenizer = countingTokenizeFetch();
  const runtime = await runtimeOf(model({ tokenizer: { mode: "engine" } }), {
    fetch: tokenizer.fetch,
  });
  const prompt = range(100, 40);
  const { plan } = await planDispatch(runtime, tokensRequest(prompt), context(runtime));
  assertEquals(tokenizer.calls, [], "no tokenize call for token ids");
  assertEquals(plan.tokenSource, "token_ids");
  assertEquals(plan.tokens, prompt);
  assertEquals(plan.promptTokens, 40);
  assertEquals(plan.keys.length, 2, "40 tokens: two full chunks of 16 hashed");

  // The same runtime does tokenize text: the tokenizer was there to be skipped.
  const text = await planDispatch(runtime, textRequest("hello"), context(runtime));
  assertEquals(tokenizer.calls, ["/tokenize"]);
  assertEquals(text.plan.tokenSource, "tokenized");
  assertEquals(text.plan.tokens, [..."hello"].map((c) => c.charCodeAt(0)));
});

Deno.test("planDispatch: a prompt under kv.minPromptTokens is not looked up, a longer one is", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    const runtime = await runtimeOf(
      model({}, {
        store: "mooncake",
        url: master.url,
        minPromptTokens: 64,
        timeoutMs: 10_000,
        predictedIndex: { enabled: false },
      }),
      { fetch: globalThis.fetch.bind(globalThis) },
    );
    const short = await planDispatch(runtime, tokensRequest(range(0, 63)), context(runtime));
    assertEquals(short.plan.chunkKeys, []);
    assertEquals(short.plan.keys, []);
    assertEquals(short.plan.lookup, undefined);
    assertEquals(master.count, 0, "the store was not asked");
    assertEquals(short.plan.tokenSource, "token_ids", "the prompt itself was read");
    assertEquals(short.plan.promptTokens, 63);

    const long = await planDispatch(runtime, tokensRequest(range(0, 64)), context(runtime));
    assertEquals(long.plan.keys.length, 4);
    assertEquals(long.plan.lookup?.outcome, "ok");
    assertEquals(master.count, 1, "at the threshold the store is asked");
  } finally {
    await master.close();
  }
});

Deno.test("planDispatch: the store's hits become the holders' localPrefixTokens and the pool prefix", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    const runtime = await runtimeOf(
      model({ policy: "cache_aware" }, {
        store: "mooncake",
        url: master.url,
        timeoutMs: 10_000,
        predictedIndex: { enabled: false },
      }),
      { fetch: globalThis.fetch.bind(globalThis) },
    );
    const prompt = range(500, 64);
    const keys = runtime.keyScheme.keys(prompt);
    assertEquals(keys.length, 4);
    // e1 holds the first three chunks, e2 only the first.
    for (const key of keys.slice(0, 3)) master.put(key, `${KV_HOSTS[1]}:17000`);
    master.put(keys[0], `${KV_HOSTS[2]}:17000`);

    const { plan } = await planDispatch(runtime, tokensRequest(prompt), context(runtime));
    assertEquals(plan.keys, keys);
    assertEquals(plan.lookup?.outcome, "ok");
    assertEquals(plan.hits.localChunks.get("e1"), 3);
    assertEquals(plan.hits.localChunks.get("e2"), 1);
    assertEquals(plan.hits.poolChunks, 3);
    assertEquals(plan.poolPrefixTokens, 48);
    assertEquals(candidate(plan.candidates, "e0").localPrefixTokens, 0);
    assertEquals(candidate(plan.candidates, "e1").localPrefixTokens, 48);
    assertEquals(candidate(plan.candidates, "e2").localPrefixTokens, 16);
    assertEquals(plan.decision.ranking[0], "e1", "cache_aware picks the longest local prefix");
  } finally {
    await master.close();
  }
});

/**
 * Plans a 64-token prompt whose first three chunks (48 tokens) e1's segment holds in the store, on
 * an idle cluster with `policy`, kv.poolLoads as given and `keys` in the kv config; the
 * reservation goes to `take` (cancelled when absent).
 */
async function planStored(
  master: FakeMooncakeMaster,
  poolLoads: boolean | undefined,
  policy: string,
  keys: Record<string, unknown> = {},
  take = (reservation: Reservation | undefined) => reservation?.cancel(),
) {
  const runtime = await runtimeOf(
    model({ policy }, {
      store: "mooncake",
      url: master.url,
      timeoutMs: 10_000,
      predictedIndex: { enabled: false },
      poolLoads,
      ...keys,
    }),
    { fetch: globalThis.fetch.bind(globalThis) },
  );
  const prompt = range(900, 64);
  for (const key of runtime.keyScheme.keys(prompt).slice(0, 3)) {
    master.put(key, `${KV_HOSTS[1]}:17000`);
  }
  const { plan, reservation } = await planDispatch(
    runtime,
    tokensRequest(prompt),
    context(runtime),
  );
  take(reservation);
  return plan;
}

Deno.test("planDispatch: with kv.poolLoads a copy from the store takes the pool weight and predictions count loading it", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    const planFor = (
      poolLoads: boolean | undefined,
      policy = "affinity_ttft",
      keys: Record<string, unknown> = {},
    ) => planStored(master, poolLoads, policy, keys);
    const duplication = (plan: Awaited<ReturnType<typeof planFor>>, id: string) =>
      plan.decision.scores.find((s) => s.id === id)?.terms.duplicationS ?? NaN;
    const own = await planFor(undefined);
    const loads = await planFor(true);
    assertEquals(own.inputs.poolUse, undefined, "llumnix keys: engines reuse only what they hold");
    assertEquals(loads.inputs.poolUse, "always");
    // vLLM's MooncakeStoreConnector loads by itself: its key format turns the flag on, unless set.
    const vllmKeys = { keyFormat: "vllm-mooncake-store", keyParams: { model: "m" } };
    assertEquals((await planFor(undefined, "affinity_ttft", vllmKeys)).inputs.poolUse, "always");
    assertEquals((await planFor(false, "affinity_ttft", vllmKeys)).inputs.poolUse, undefined);
    // On an idle cluster the pool weight is 0.5, the weight of a copy only e1 could give 8.
    assert(duplication(own, "e0") > 0, JSON.stringify(own.decision.scores));
    assertEquals(duplication(loads, "e0") * 16, duplication(own, "e0"));
    assertEquals(duplication(loads, "e1"), 0);
    // least_load sends it to e0, which lacks the stored part: its predicted TTFT counts loading
    // that part only when the engines do.
    const [recomputed, loaded] = [
      await planFor(false, "least_load"),
      await planFor(true, "least_load"),
    ];
    assertEquals([recomputed.decision.ranking[0], loaded.decision.ranking[0]], ["e0", "e0"]);
    assert(
      loaded.predictedTtftS! < recomputed.predictedTtftS!,
      `${loaded.predictedTtftS} with the store's part loaded, ${recomputed.predictedTtftS} without`,
    );
  } finally {
    await master.close();
  }
});

Deno.test("planDispatch: with kv.poolLoads the lease counts only what the engine computes after loading the stored part", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    const leasedFor = async (poolLoads: boolean) => {
      let prefillTokens = NaN;
      const plan = await planStored(master, poolLoads, "least_load", {}, (reservation) => {
        const taken = reservation!.take()!;
        taken.lease.release();
        prefillTokens = taken.lease.prefillTokens;
      });
      assertEquals(plan.decision.ranking[0], "e0");
      return prefillTokens;
    };
    assertEquals(await leasedFor(false), 64);
    assertEquals(await leasedFor(true), 64 - 48);
  } finally {
    await master.close();
  }
});

Deno.test("planDispatch: the reservation is on the first choice and the very next plan sees it", async () => {
  const runtime = await runtimeOf(model());
  const account = runtime.cluster.account;
  const prompt = range(0, 64);
  const first = await planDispatch(runtime, tokensRequest(prompt), context(runtime));
  const chosen = first.plan.decision.ranking[0];
  assertEquals(chosen, "e0", "least_load, all idle, ties by order");
  assert(first.reservation, "an admitted plan has a reservation");
  assertEquals(first.reservation.instanceId, chosen);
  assertEquals(account.load(chosen).prefillTokens, 64, "the prompt is leased on e0");
  assertEquals(account.load(chosen).prefillRequests, 1);
  assertEquals(account.load("e1").prefillTokens, 0);

  // The same prompt again: the predicted index says e0 is writing its chunks.
  const again = await planDispatch(runtime, tokensRequest(prompt), context(runtime));
  assertEquals(candidate(again.plan.candidates, "e0").localPrefixTokens, 64);
  assertEquals(candidate(again.plan.candidates, "e1").localPrefixTokens, 0);
  assertEquals(candidate(again.plan.candidates, "e0").waitingPrefillTokens, 64);
  assertEquals(again.plan.decision.ranking[0], "e1", "least_load moves on from the loaded e0");
  again.reservation?.cancel();

  // Cancelled: e0's load and its predicted writes are gone for the next plan.
  first.reservation.cancel();
  assertEquals(account.load(chosen).prefillTokens, 0);
  assertEquals(first.reservation.take(), undefined, "nothing left to hand on after cancel");
  const after = await planDispatch(runtime, tokensRequest(prompt), context(runtime));
  assertEquals(candidate(after.plan.candidates, "e0").localPrefixTokens, 0);
  assertEquals(candidate(after.plan.candidates, "e0").waitingPrefillTokens, 0);
  after.reservation?.cancel();
});

Deno.test("planDispatch: two plans back to back spread over the instances (each sees the other's lease)", async () => {
  const runtime = await runtimeOf(model());
  const [a, b] = await Promise.all([
    planDispatch(runtime, tokensRequest(range(0, 64)), context(runtime)),
    planDispatch(runtime, tokensRequest(range(1000, 64)), context(runtime)),
  ]);
  assertEquals([a.reservation?.instanceId, b.reservation?.instanceId], ["e0", "e1"]);
  assertEquals(candidate(b.plan.candidates, "e0").waitingPrefillTokens, 64);
  a.reservation?.cancel();
  b.reservation?.cancel();
});

Deno.test("planDispatch: an admission refusal takes no reservation (no load, no predicted keys)", async () => {
  const runtime = await runtimeOf(model({ slo: { ttftS: 1e-9, admission: true } }));
  const { plan, reservation } = await planDispatch(
    runtime,
    tokensRequest(range(0, 64)),
    context(runtime),
  );
  assert(!plan.admission.admit, "refused");
  assertEquals(plan.admission.reason, "ttft_slo");
  assertEquals(plan.decision.ranking.length, 3, "the policy did rank the instances");
  assertEquals(reservation, undefined);
  for (const id of ["e0", "e1", "e2"]) {
    assertEquals(runtime.cluster.account.load(id).prefillRequests, 0, id);
  }
  assertEquals(runtime.predicted!.size, 0, "no predicted KV writes");
});

Deno.test("planDispatch: a policy that ranks nothing takes no reservation", async () => {
  const runtime = await runtimeOf(model());
  const seen: { request: ScheduleRequest; candidates: string[] }[] = [];
  const nothing: NamedPolicy = {
    name: "nothing",
    ttftParams: resolveTtftParams(),
    policy: {
      name: "nothing",
      select(request, candidates) {
        seen.push({ request, candidates: candidates.map((c) => c.id) });
        return { policy: "nothing", ranking: [], scores: [] };
      },
    },
  };
  const { plan, reservation } = await planDispatch(
    runtime,
    tokensRequest(range(0, 64)),
    context(runtime, nothing),
  );
  assertEquals(seen.length, 1);
  assertEquals(seen[0].candidates, ["e0", "e1", "e2"]);
  assertEquals(seen[0].request.promptTokens, 64);
  assertEquals(plan.policy.name, "nothing");
  assertEquals(plan.decision.ranking, []);
  assert(plan.admission.admit, "nothing refused it: there is just nobody to send it to");
  assertEquals(reservation, undefined);
  for (const id of ["e0", "e1", "e2"]) {
    assertEquals(runtime.cluster.account.load(id).prefillRequests, 0, id);
  }
  assertEquals(runtime.predicted!.size, 0);
});

Deno.test("promptTokensOf() counts every prompt of a batch", () => {
  const ids = { kind: "tokens" as const, tokens: [1, 2], extraPromptCount: 2, batchSize: 30 };
  assertEquals(promptTokensOf(ids, ids.tokens), 30);
  // Three texts of 40 characters sharing 20: the shared part's 5 tokens each, then 20 of their
  // own characters each at ~4 a token.
  const texts = {
    kind: "text" as const,
    text: "x".repeat(20),
    extraPromptCount: 2,
    batchSize: 120,
  };
  assertEquals(promptTokensOf(texts, [1, 2, 3, 4, 5]), 5 * 3 + 15);
  assertEquals(promptTokensOf(texts, undefined), 30, "untokenized: ~4 characters a token");
  const one = { kind: "text" as const, text: "hello", extraPromptCount: 0 };
  assertEquals(promptTokensOf(one, [9, 9]), 2);
  assertEquals(promptTokensOf({ kind: "opaque", chars: 41 }, undefined), 11);
});

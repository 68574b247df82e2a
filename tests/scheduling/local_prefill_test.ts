import { assert, assertAlmostEquals, assertEquals } from "../assert.ts";
import {
  admitLocalPrefill,
  decideLocalPrefill,
  type LocalPrefillOptions,
} from "../../src/scheduling/local_prefill.ts";
import { DEFAULT_DECODE_MODEL } from "../../src/scheduling/decode_model.ts";
import { DEFAULT_TTFT_PARAMS, estimateTtft } from "../../src/scheduling/ttft_estimate.ts";
import type { Candidate } from "../../src/scheduling/types.ts";

const decode = (over: Partial<Candidate> = {}): Candidate => ({
  id: "d0",
  healthy: true,
  localPrefixTokens: 0,
  waitingPrefillTokens: 0,
  runningRequests: 4,
  ...over,
});

const options = (mode: LocalPrefillOptions["mode"]): LocalPrefillOptions => ({
  mode,
  maxLocalTokens: 1000,
  ttft: DEFAULT_TTFT_PARAMS,
  decodeModel: DEFAULT_DECODE_MODEL,
});

/** The prefill side's TTFT for a prompt on an idle prefill instance holding `hit` tokens. */
function remote(prompt: number, hit: number, queuedTokens = 0): number {
  const candidate = decode({
    id: "p0",
    localPrefixTokens: hit,
    waitingPrefillTokens: queuedTokens,
  });
  return estimateTtft({ promptTokens: prompt, poolPrefixTokens: 0 }, candidate, DEFAULT_TTFT_PARAMS)
    .totalS;
}

Deno.test("off never prefills on the decode instance", () => {
  const verdict = decideLocalPrefill({ promptTokens: 10, decode: decode() }, options("off"));
  assertEquals([verdict.local, verdict.reason], [false, "off"]);
});

Deno.test("threshold (Dynamo's rule): local when what the decode instance lacks is short", () => {
  const short = decideLocalPrefill(
    { promptTokens: 9000, decode: decode({ localPrefixTokens: 8200 }) },
    options("threshold"),
  );
  assertEquals([short.local, short.uncachedTokens, short.reason], [true, 800, "short_suffix"]);
  const long = decideLocalPrefill(
    { promptTokens: 9000, decode: decode({ localPrefixTokens: 512 }) },
    options("threshold"),
  );
  assertEquals([long.local, long.uncachedTokens, long.reason], [false, 8488, "long_suffix"]);
});

Deno.test("predicted: local when the prefill side's queue outweighs the decode instance's prefill", () => {
  const prompt = 8192;
  const busy = decideLocalPrefill(
    { promptTokens: prompt, decode: decode(), remoteTtftS: remote(prompt, 0, 32_768) },
    options("predicted"),
  );
  assertEquals([busy.local, busy.reason], [true, "local_faster"]);
  const holder = decideLocalPrefill(
    { promptTokens: prompt, decode: decode(), remoteTtftS: remote(prompt, 8000) },
    options("predicted"),
  );
  assertEquals([holder.local, holder.reason], [false, "remote_faster"]);
  const queuedHere = decideLocalPrefill(
    {
      promptTokens: prompt,
      decode: decode({ waitingPrefillTokens: 65_536 }),
      remoteTtftS: remote(prompt, 0),
    },
    options("predicted"),
  );
  assertEquals(
    queuedHere.local,
    false,
    "prefill work already queued on the decode instance counts",
  );
  const unknown = decideLocalPrefill(
    { promptTokens: prompt, decode: decode() },
    options("predicted"),
  );
  assertEquals([unknown.local, unknown.reason], [false, "no_remote_estimate"]);
});

Deno.test("predicted: a local verdict past the threshold always has the smaller predicted TTFT", () => {
  let state = 7;
  const random = () => (state = (state * 48271) % 2147483647) / 2147483647;
  for (let i = 0; i < 500; i++) {
    const prompt = 1 + Math.floor(random() * 32_000);
    const verdict = decideLocalPrefill({
      promptTokens: prompt,
      decode: decode({
        localPrefixTokens: Math.floor(random() * prompt),
        waitingPrefillTokens: Math.floor(random() * 20_000),
        runningRequests: Math.floor(random() * 64),
      }),
      remoteTtftS: remote(prompt, Math.floor(random() * prompt), Math.floor(random() * 20_000)),
    }, options("predicted"));
    if (verdict.reason === "short_suffix") assert(verdict.uncachedTokens <= 1000);
    else if (verdict.local) assert(verdict.localTtftS! <= verdict.remoteTtftS!);
    else assert(verdict.localTtftS! > verdict.remoteTtftS!);
  }
});

Deno.test("with a TBT SLO, a decoding instance prefills locally only when the pause fits the SLO", () => {
  // 800 uncached tokens on a 9k prompt: ~0.1 s of prefill, past a 50 ms TBT SLO.
  const inputs = { promptTokens: 9000, remoteTtftS: 30 };
  const guarded = { ...options("predicted"), tbtSloS: 0.05 };
  const stalled = decideLocalPrefill(
    { ...inputs, decode: decode({ localPrefixTokens: 8200 }) },
    guarded,
  );
  assertEquals([stalled.local, stalled.reason], [false, "decode_stall"]);
  assert(stalled.stallS! > 0.05, `pause ${stalled.stallS}`);
  const threshold = decideLocalPrefill(
    { ...inputs, decode: decode({ localPrefixTokens: 8200 }) },
    { ...guarded, mode: "threshold" },
  );
  assertEquals(threshold.reason, "decode_stall", "the simple mode is guarded too");
  // A looser SLO, or an instance with nothing running, takes it.
  const loose = decideLocalPrefill(
    { ...inputs, decode: decode({ localPrefixTokens: 8200 }) },
    { ...guarded, tbtSloS: 5 },
  );
  assertEquals([loose.local, loose.reason], [true, "short_suffix"]);
  const idle = decideLocalPrefill(
    { ...inputs, decode: decode({ localPrefixTokens: 8200, runningRequests: 0 }) },
    guarded,
  );
  assertEquals([idle.local, idle.reason], [true, "short_suffix"]);
});

Deno.test("with chunked prefill the pause is the last chunk and the local TTFT a step per chunk", () => {
  // The same 800 uncached tokens, computed 200 a step: each pause is one 200-token chunk, which
  // fits a 90 ms TBT SLO where the whole prefill does not.
  const inputs = {
    promptTokens: 9000,
    remoteTtftS: 30,
    decode: decode({ localPrefixTokens: 8200 }),
  };
  const guarded = { ...options("predicted"), tbtSloS: 0.09 };
  const whole = decideLocalPrefill(inputs, guarded);
  assertEquals(whole.reason, "decode_stall");
  const chunked = decideLocalPrefill(inputs, { ...guarded, chunkTokens: 200 });
  assertEquals([chunked.local, chunked.reason], [true, "short_suffix"]);
  // Four chunks: three decode steps more than the whole prefill's one.
  const alone = decideLocalPrefill(inputs, { ...guarded, tbtSloS: undefined });
  const stepS = alone.localTtftS! - estimateTtft(
    { promptTokens: 9000, poolPrefixTokens: 0 },
    inputs.decode,
    DEFAULT_TTFT_PARAMS,
    { allowTransfer: false },
  ).totalS;
  assertAlmostEquals(chunked.localTtftS! - alone.localTtftS!, 3 * stepS, 1e-9);
  // Prefill work queued there is chunked too: 1,000 queued tokens are five more steps ahead.
  const busy = {
    ...inputs,
    decode: decode({ localPrefixTokens: 8200, waitingPrefillTokens: 1000 }),
  };
  const busyChunked = decideLocalPrefill(busy, { ...guarded, chunkTokens: 200 });
  const busyAlone = decideLocalPrefill(busy, { ...guarded, tbtSloS: undefined });
  assertAlmostEquals(busyChunked.localTtftS! - busyAlone.localTtftS!, 8 * stepS, 1e-9);
  // Under a tighter SLO the refusal reports the chunk's pause, far below the whole prefill's.
  const tight = { ...guarded, tbtSloS: 0.05, chunkTokens: 200 };
  const stalled = decideLocalPrefill(inputs, tight);
  assertEquals(stalled.reason, "decode_stall");
  assert(stalled.stallS! > 0.05 && stalled.stallS! < whole.stallS! / 1.5, `${stalled.stallS}`);
  // The last chunk has the longest context: it costs more than a prompt's first chunk.
  const first = decideLocalPrefill(
    { ...inputs, decode: decode({ localPrefixTokens: 0 }), promptTokens: 800 },
    tight,
  );
  assertEquals(first.reason, "decode_stall");
  assert(stalled.stallS! > first.stallS!, `${stalled.stallS} against ${first.stallS}`);
  // A suffix within one chunk still waits for the chunks of the work queued ahead of it.
  const oneChunk = decideLocalPrefill(busy, { ...guarded, tbtSloS: undefined, chunkTokens: 1000 });
  assertAlmostEquals(oneChunk.localTtftS! - busyAlone.localTtftS!, stepS, 1e-9);
  // A pause never shrinks as the suffix grows past a chunk, whatever per-pass terms the model has.
  const withConstant = {
    ...guarded,
    tbtSloS: 0.001,
    chunkTokens: 512,
    ttft: {
      ...DEFAULT_TTFT_PARAMS,
      prefillModel: { ...DEFAULT_TTFT_PARAMS.prefillModel, constant: 0.05 },
    },
  };
  const pauses = [511, 512, 513, 1024, 2000].map((suffix) =>
    decideLocalPrefill(
      { ...inputs, decode: decode({ localPrefixTokens: 9000 - suffix }) },
      withConstant,
    ).stallS!
  );
  for (let k = 1; k < pauses.length; k++) {
    assert(pauses[k] >= pauses[k - 1] - 1e-12, `pauses ${pauses.join(", ")}`);
  }
});

Deno.test("admitLocalPrefill: a TTFT refusal of the remote plan is lifted when the local TTFT fits", () => {
  const refused = {
    admit: false as const,
    status: 429 as const,
    reason: "ttft_slo" as const,
    retryAfterS: 5,
    message: "m",
  };
  const local = {
    local: true,
    uncachedTokens: 100,
    localTtftS: 1.2,
    reason: "local_faster" as const,
  };
  assertEquals(admitLocalPrefill(refused, local, 2), { admit: true });
  assertEquals(admitLocalPrefill(refused, { ...local, localTtftS: 2.5 }, 2), refused);
  assertEquals(
    admitLocalPrefill(refused, { ...local, local: false }, 2),
    refused,
    "remote: stands",
  );
  const tbt = { ...refused, reason: "tbt_slo" as const };
  assertEquals(admitLocalPrefill(tbt, local, 2), tbt, "it decodes there either way");
  assertEquals(admitLocalPrefill({ admit: true }, local, 2), { admit: true });
});

Deno.test("where the engines load the pool's prefix by themselves, a local prefill reuses it too", () => {
  const inputs = { promptTokens: 9000, decode: decode({ localPrefixTokens: 512 }) };
  const pool = { prefixTokens: 8192 };
  const loads = decideLocalPrefill({ ...inputs, pool: { ...pool, loads: true } }, {
    ...options("threshold"),
  });
  assertEquals([loads.local, loads.uncachedTokens, loads.reason], [true, 808, "short_suffix"]);
  // Engines that read only what they hold: the pool changes nothing.
  const own = decideLocalPrefill(
    { ...inputs, pool: { ...pool, loads: false } },
    options("threshold"),
  );
  assertEquals([own.local, own.uncachedTokens, own.reason], [false, 8488, "long_suffix"]);
  // In predicted mode the local TTFT counts the load from the pool and the shorter prefill.
  const predicted = (loads: boolean) =>
    decideLocalPrefill(
      { ...inputs, remoteTtftS: remote(9000, 0), pool: { ...pool, loads } },
      { ...options("predicted"), maxLocalTokens: 0 },
    ).localTtftS!;
  assert(predicted(true) < predicted(false), `${predicted(true)} < ${predicted(false)}`);
  // The engine loads all the pool holds, whatever the router's balancing threshold for planned
  // transfers: the same count as the predicted hit's (predicted_reuse.ts).
  const balanced = decideLocalPrefill(
    {
      promptTokens: 9000,
      decode: decode({ localPrefixTokens: 4096 }),
      pool: { prefixTokens: 6144, loads: true },
    },
    {
      ...options("threshold"),
      maxLocalTokens: 3000,
      ttft: { ...DEFAULT_TTFT_PARAMS, balancingThreshold: 2 },
    },
  );
  assertEquals([balanced.local, balanced.uncachedTokens], [true, 2856]);
});

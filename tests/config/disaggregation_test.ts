import { assert, assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { problemsOf } from "./config_problems.ts";

const model = (extra: Record<string, unknown>) => ({
  models: [{ name: "m", tokenizer: { mode: "none" }, kv: { store: "none" }, ...extra }],
});

Deno.test("a disaggregated model takes its protocol, roles and bootstrap ports, with defaults", () => {
  const config = resolveConfig(model({
    disaggregation: { protocol: "sglang" },
    instances: [
      { id: "p0", url: "http://p0:30000", role: "prefill", bootstrapPort: 9000 },
      { id: "d0", url: "http://d0:30000", role: "decode" },
    ],
    discovery: [{ name: "p", hostname: "p.svc", port: 30000, role: "prefill" }],
  }));
  const m = config.models[0];
  assertEquals(m.disaggregation, {
    protocol: "sglang",
    earlyRejection: "committed",
    decodeLoad: "instance",
    decodePolicy: "least_running",
    decodeModel: { baseS: 0.03, perRequestS: 0.0005 },
    decodeBatchKv: "reported",
    meanDecodeS: 10,
    localPrefill: { mode: "off", maxTokens: 1000 },
  });
  assertEquals(m.instances.map((i) => [i.role, i.bootstrapPort]), [
    ["prefill", 9000],
    ["decode", undefined],
  ]);
});

Deno.test("a disaggregated model without a decode instance is refused, saying what it has", () => {
  const problems = problemsOf(model({
    disaggregation: { protocol: "vllm-nixl" },
    instances: [
      { id: "p0", url: "http://p0:8000", role: "prefill" },
      { id: "n0", url: "http://n0:8000" },
    ],
  }));
  assertEquals(problems, [
    "models[0].disaggregation: needs at least one decode instance (instances or discovery " +
    'entries with role "prefill" / "decode"); it has 1 prefill, 0 decode and 1 neutral',
  ]);
  const none = problemsOf(model({
    disaggregation: { protocol: "vllm-mooncake" },
    instances: [{ id: "n0", url: "http://n0:8000" }],
  }));
  assert(none[0].includes("needs at least one prefill and one decode instance"), none[0]);
});

Deno.test("a decode model with a KV term must say what KV to assume where an engine reports none", () => {
  const withModel = (decodeModel: Record<string, number>) =>
    problemsOf(model({
      disaggregation: { protocol: "vllm-nixl", decodeModel, decodeMaxBatch: 64 },
      instances: [
        { id: "p0", url: "http://p0:8000", role: "prefill" },
        { id: "d0", url: "http://d0:8000", role: "decode" },
      ],
    }));
  assertEquals(withModel({ perKvTokenS: 4e-8 }), [
    "models[0].disaggregation.decodeModel: perKvTokenS needs kvTokensPerRequest: the KV per " +
    "request assumed where an engine reports none",
  ]);
  assertEquals(withModel({ perKvTokenS: 4e-8, kvTokensPerRequest: 4000 }), []);
  assertEquals(withModel({ baseS: 0.02 }), []);
});

Deno.test("prefill and decode roles without disaggregation, and unknown protocols, are refused", () => {
  const problems = problemsOf(model({
    instances: [{ id: "p0", url: "http://p0:8000", role: "prefill" }],
    discovery: [{ name: "d", hostname: "d.svc", port: 8000, role: "decode" }],
  }));
  assertEquals(problems.map((p) => p.split(":")[0]), [
    "models[0].instances[0].role",
    "models[0].discovery[0].role",
  ]);
  assert(problems[0].includes("needs the model's disaggregation section"), problems[0]);
  const bad = problemsOf(model({
    disaggregation: { protocol: "nixl" },
    instances: [{ id: "n0", url: "http://n0:8000" }],
  }));
  assert(bad.some((p) => p.startsWith("models[0].disaggregation.protocol")), bad.join("\n"));
  const scope = problemsOf(model({
    disaggregation: { protocol: "sglang", decodeLoad: "cluster" },
    instances: [{ id: "n0", url: "http://n0:8000" }],
  }));
  assert(scope.some((p) => p.startsWith("models[0].disaggregation.decodeLoad")), scope.join("\n"));
});

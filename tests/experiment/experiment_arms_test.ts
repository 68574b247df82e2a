import { assert, assertEquals, assertThrows } from "../assert.ts";
import { ConfigError, resolveConfig } from "../../src/config/load.ts";
import {
  ExperimentArms,
  ExperimentError,
  experimentProblems,
  OPERATOR_TOKEN_HEADER,
} from "../../src/experiment/experiment_arms.ts";
import { ModelRuntime } from "../../src/runtime/model_runtime.ts";
import { HttpError } from "../../src/openai/errors.ts";

const EXPERIMENT = {
  key: "header:x-session-id",
  overrideHeader: "x-tidegate-arm",
  arms: [
    { name: "A", policy: "cache_aware", weight: 1 },
    { name: "B", policy: "least_load", weight: 1 },
  ],
};

function config(experiment: unknown = EXPERIMENT, top: Record<string, unknown> = {}) {
  return resolveConfig({
    admin: { token: "secret" },
    models: [{
      name: "m",
      tokenizer: { mode: "none" },
      kv: { store: "none" },
      instances: [{ id: "e0", url: "http://127.0.0.1:9" }],
      ...(experiment === null ? {} : { experiment }),
    }],
    ...top,
  });
}

async function setup(experiment: unknown = EXPERIMENT) {
  const resolved = config(experiment);
  const runtime = await ModelRuntime.create(resolved.models[0], {
    fetch: () => Promise.reject(new Error("no network in this test")),
    now: () => 0,
    random: Math.random,
    log: () => {},
  });
  const logs: { message: string; fields?: Record<string, unknown> }[] = [];
  const changes: string[] = [];
  const arms = new ExperimentArms({
    random: Math.random,
    wallNow: () => 1_700_000_000_000,
    log: (message, fields) => logs.push({ message, fields }),
    adminToken: () => resolved.admin.token,
    onChange: (model, live) => changes.push(`${model}:${live?.version ?? "ended"}`),
  });
  arms.sync([runtime]);
  return { runtime, arms, logs, changes };
}

const req = (headers: Record<string, string> = {}) =>
  new Request("http://router/v1/completions", { method: "POST", headers });

Deno.test("config validation lists bad arms: duplicates, weights, names, too few", () => {
  const error = assertThrows(
    () =>
      config({
        key: "cookie",
        arms: [
          { name: "A", policy: "cache_aware", weight: 0 },
          { name: "A", policy: "least_load" },
          { name: "none", policy: "random" },
        ],
      }),
    ConfigError,
  ) as ConfigError;
  const text = error.problems.join("\n");
  for (
    const part of [
      "models[0].experiment.key",
      "models[0].experiment.arms[0].weight",
      'models[0].experiment.arms[1].name: duplicate arm name "A"',
      "models[0].experiment.arms[2].name",
    ]
  ) assert(text.includes(part), `${part} missing from:\n${text}`);
  assertThrows(
    () => config({ arms: [{ name: "A", policy: "random" }] }),
    ConfigError,
    "at least two arms",
  );
});

Deno.test("config validation refuses an override header without an admin token", () => {
  assertThrows(() => config(EXPERIMENT, { admin: {} }), ConfigError, "needs admin.token");
});

Deno.test("resolveConfig() refuses an arm whose policy does not exist, suggesting a name", () => {
  const problems = (assertThrows(
    () =>
      config({ arms: [{ name: "A", policy: "cache_aware" }, { name: "B", policy: "leastload" }] }),
    ConfigError,
  ) as ConfigError).problems;
  assertEquals(problems.length, 1);
  assert(problems[0].startsWith("models[0].experiment.arms[1].policy: Unknown scheduling policy"));
  assert(problems[0].endsWith('(did you mean "least_load"?)'), problems[0]);
});

Deno.test("experimentProblems() names an arm whose policy does not exist", () => {
  // resolveConfig() refuses the name itself; a config built in code reaches this check.
  const built = structuredClone(config({
    arms: [{ name: "A", policy: "cache_aware" }, { name: "B", policy: "least_load" }],
  }));
  built.models[0].experiment!.arms[1].policy = "fastest";
  const problems = experimentProblems(built);
  assertEquals(problems.length, 1);
  assert(problems[0].startsWith("models[0].experiment.arms[1].policy: Unknown scheduling policy"));
});

Deno.test("ExperimentArms assigns sticky arms by the configured header", async () => {
  const { runtime, arms } = await setup();
  const seen = new Map<string, string>();
  for (let round = 0; round < 3; round++) {
    for (let s = 0; s < 40; s++) {
      const selection = arms.select(runtime, req({ "x-session-id": `s${s}` }), {});
      if (round === 0) seen.set(`s${s}`, selection.arm);
      else assertEquals(selection.arm, seen.get(`s${s}`));
      assertEquals(selection.experiment?.assignment, "sticky");
      assertEquals(selection.policy.name, selection.arm === "A" ? "cache_aware" : "least_load");
    }
  }
  assertEquals(new Set(seen.values()).size, 2);
  assertEquals(arms.select(runtime, req(), {}).experiment?.assignment, "fallback");
});

Deno.test("the override header picks an arm only with the admin token", async () => {
  const { runtime, arms } = await setup();
  const session = { "x-session-id": "s1" };
  const natural = arms.select(runtime, req(session), {}).arm;
  const other = natural === "A" ? "B" : "A";
  // Without (or with a wrong) token the header is ignored.
  assertEquals(arms.select(runtime, req({ ...session, "x-tidegate-arm": other }), {}).arm, natural);
  assertEquals(
    arms.select(
      runtime,
      req({
        ...session,
        "x-tidegate-arm": other,
        [OPERATOR_TOKEN_HEADER]: "guess",
      }),
      {},
    ).arm,
    natural,
  );
  const forced = arms.select(
    runtime,
    req({
      ...session,
      "x-tidegate-arm": other,
      [OPERATOR_TOKEN_HEADER]: "secret",
    }),
    {},
  );
  assertEquals([forced.arm, forced.experiment?.assignment], [other, "override"]);
  assertEquals(forced.privateHeaders, [OPERATOR_TOKEN_HEADER, "x-tidegate-arm"]);
  const error = assertThrows(
    () =>
      arms.select(runtime, req({ "x-tidegate-arm": "C", [OPERATOR_TOKEN_HEADER]: "secret" }), {}),
    HttpError,
    "the arms of model 'm' are A, B",
  ) as HttpError;
  assertEquals(error.status, 400);
});

Deno.test("a model without an experiment keeps its own policy as arm 'default'", async () => {
  const { runtime, arms } = await setup(null);
  const selection = arms.select(runtime, req(), {});
  assertEquals([selection.arm, selection.policy.name], ["default", "affinity_ttft"]);
  assertEquals(selection.experiment, undefined);
  assertEquals(arms.list(), []);
});

Deno.test("apply() replaces arms at runtime with a new version, logged and reported", async () => {
  const { runtime, arms, logs, changes } = await setup();
  const before = arms.get("m")!;
  const live = arms.apply(runtime, {
    key: "user",
    arms: [{ name: "A", policy: "cache_aware" }, { name: "C", policy: "mooncake_ttft", weight: 3 }],
  })!;
  assert(live.version > before.version);
  assertEquals(live.arms.map((a) => [a.name, a.policy.name, a.weight]), [
    ["A", "cache_aware", 1],
    ["C", "mooncake_ttft", 3],
  ]);
  assertEquals(changes, [`m:${live.version}`]);
  const log = logs.find((l) => l.message === "experiment arms changed")!;
  assertEquals(log.fields?.source, "admin");
  assertEquals(log.fields?.arms, ["A=cache_aware×1", "C=mooncake_ttft×3"]);
  assertEquals(arms.select(runtime, req(), { user: "u1" }).experiment?.version, live.version);
  arms.apply(runtime, undefined);
  assertEquals(arms.get("m"), undefined);
  assertEquals(changes.at(-1), "m:ended");
});

Deno.test("apply() rejects an invalid experiment listing every problem and keeps the arms", async () => {
  const { runtime, arms } = await setup();
  const version = arms.get("m")!.version;
  const error = assertThrows(
    () =>
      arms.apply(runtime, {
        arms: [{ name: "A", policy: "nope" }, { name: "B", policy: "random", weight: -1 }],
      }),
    ExperimentError,
  ) as ExperimentError;
  assert(error.problems.some((p) => p.startsWith("arms[1].weight")), error.message);
  const unknown = assertThrows(
    () =>
      arms.apply(runtime, {
        arms: [{ name: "A", policy: "nope" }, { name: "B", policy: "random" }],
      }),
    ExperimentError,
  ) as ExperimentError;
  assertEquals(unknown.problems.length, 1);
  assert(unknown.problems[0].startsWith("arms[0].policy: Unknown scheduling policy"));
  assertEquals(arms.get("m")!.version, version);
});

Deno.test("a reload adopts a changed experiment section but keeps admin changes otherwise", async () => {
  const { runtime, arms, changes } = await setup();
  const admin = arms.apply(runtime, {
    arms: [{ name: "A", policy: "cache_aware" }, { name: "B", policy: "random" }],
  })!;
  // Reload with the same experiment section: the admin change survives.
  const same = await ModelRuntime.create(config().models[0], {
    fetch: fetch,
    now: () => 0,
    random: Math.random,
    log: () => {},
  });
  arms.sync([same]);
  assertEquals(arms.get("m")!.version, admin.version);
  assertEquals(arms.get("m")!.arms[1].policy.name, "random");
  // Reload with a changed section: the file wins.
  const changed = await ModelRuntime.create(
    config({ ...EXPERIMENT, arms: [...EXPERIMENT.arms, { name: "C", policy: "round_robin" }] })
      .models[0],
    { fetch, now: () => 0, random: Math.random, log: () => {} },
  );
  arms.sync([changed]);
  const live = arms.get("m")!;
  assertEquals([live.source, live.arms.map((a) => a.name)], ["reload", ["A", "B", "C"]]);
  assertEquals(changes.length, 2);
  // The model disappears from the config: its experiment ends.
  arms.sync([]);
  assertEquals(arms.list(), []);
  assertEquals(changes.at(-1), "m:ended");
});

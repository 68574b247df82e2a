/** A config with many mistakes gets one report naming each, with a suggestion for typos. */
import { assert, assertEquals } from "../assert.ts";
import { ConfigError, resolveConfig } from "../../src/config/load.ts";
import { problemsOf } from "./config_problems.ts";
import { buildRuntimes } from "../../src/runtime/build_runtimes.ts";

const model = (fields: Record<string, unknown>) => ({
  name: "m",
  tokenizer: { mode: "none" },
  kv: { store: "none" },
  instances: [{ id: "a", url: "http://127.0.0.1:8001" }],
  ...fields,
});

function assertHas(problems: string[], expected: string): void {
  assert(problems.includes(expected), `${expected}\nnot in:\n${problems.join("\n")}`);
}

Deno.test("unknown fields anywhere are listed together, each with the closest field name", () => {
  const problems = problemsOf({
    listn: { port: 1 },
    models: [model({ polcy: "cache_aware", kv: { store: "none", chunkSze: 16 } })],
  });
  assertHas(problems, 'listn: unknown field (did you mean "listen"?)');
  assertHas(problems, 'models[0].polcy: unknown field (did you mean "policy"?)');
  assertHas(problems, 'models[0].kv.chunkSze: unknown field (did you mean "chunkSize"?)');
  assertEquals(problems.length, 3);
});

Deno.test("a field nothing resembles is unknown with no suggestion", () => {
  assertEquals(problemsOf({ models: [model({ zebra: 1 })] }), ["models[0].zebra: unknown field"]);
});

Deno.test("a misspelt enum value suggests the valid one", () => {
  const problems = problemsOf({ models: [model({ tokenizer: { mode: "engnie" } })] });
  assertEquals(problems.length, 1);
  assert(problems[0].startsWith("models[0].tokenizer.mode: "), problems[0]);
  assert(problems[0].endsWith('(did you mean "engine"?)'), problems[0]);
});

Deno.test("policy, key format and field problems of several models come in one report", () => {
  const problems = problemsOf({
    limits: { maxRetrys: 1 },
    models: [
      model({ name: "a", policy: "cache_awre" }),
      model({ name: "b", kv: { store: "none", keyFormat: "lmcach" } }),
      model({
        name: "c",
        instances: [{ id: "x", url: "http://h:1" }, { id: "x", url: "http://h:2" }],
      }),
      model({ name: "d", policy: { name: "mooncake_ttft", params: { loadFilterTokens: -1 } } }),
    ],
  });
  assertHas(problems, 'limits.maxRetrys: unknown field (did you mean "maxRetries"?)');
  const policy = problems.find((p) => p.startsWith("models[0].policy: "));
  assert(policy?.includes('Unknown scheduling policy "cache_awre"'), policy);
  assert(policy?.endsWith('(did you mean "cache_aware"?)'), policy);
  const keyFormat = problems.find((p) => p.startsWith("models[1].kv.keyFormat: "));
  assert(keyFormat?.endsWith('(did you mean "lmcache"?)'), keyFormat);
  assertHas(problems, 'models[2].instances[1].id: duplicate instance id "x"');
  assert(
    problems.some((p) => p.startsWith("models[3].policy: Invalid parameters")),
    problems.join("\n"),
  );
  assertEquals(problems.length, 5);
});

Deno.test("an experiment arm's unknown policy is reported with the model's other problems", () => {
  const problems = problemsOf({
    models: [model({
      kv: { store: "mooncake" },
      experiment: {
        arms: [{ name: "A", policy: "cache_aware" }, { name: "B", policy: "round_robbin" }],
      },
    })],
  });
  assert(problems.some((p) => p.startsWith("models[0].kv.url: required")), problems.join("\n"));
  const arm = problems.find((p) => p.startsWith("models[0].experiment.arms[1].policy: "));
  assert(arm?.endsWith('(did you mean "round_robin"?)'), arm);
});

Deno.test("every model whose tokenizer cannot load is listed, not just the first", async () => {
  const config = resolveConfig({
    models: [
      model({ name: "a", tokenizer: { path: "builtin:qwen" } }),
      model({ name: "b", tokenizer: { path: "/nonexistent/tokenizer-dir" } }),
    ],
  });
  let problems: string[] = [];
  try {
    await buildRuntimes(config, {
      fetch,
      now: () => 0,
      random: Math.random,
      log: () => {},
    });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems = error.problems;
  }
  assertEquals(problems.length, 2, problems.join("\n"));
  assert(problems[0].startsWith("models[0] (a): "), problems[0]);
  assert(problems[0].includes('unknown builtin "qwen"'), problems[0]);
  assert(problems[1].startsWith("models[1] (b): "), problems[1]);
});

import { assert, assertEquals, assertThrows } from "../assert.ts";
import { ConfigError, parseConfigText, resolveConfig } from "../../src/config/load.ts";

// deno-lint-ignore no-explicit-any
type Mutable = Record<string, any>;

const ISSUE_EXAMPLE = {
  listen: { host: "127.0.0.1", port: 8080 },
  models: [{
    name: "qwen3",
    tokenizer: { path: "tok" },
    kv: {
      store: "mooncake",
      url: "http://127.0.0.1:9003",
      hash: "sha256_cbor",
      seed: "0",
      chunkSize: 256,
      keyFormat: "llumnix",
      minPromptTokens: 1024,
      timeoutMs: 50,
    },
    policy: "cache_aware",
    instances: [{ id: "gpu-a", url: "http://127.0.0.1:8001", kvHost: "10.0.0.1" }],
  }],
};

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

Deno.test("resolveConfig() accepts a full example config and fills defaults", () => {
  const config = resolveConfig(structuredClone(ISSUE_EXAMPLE), { baseDir: "/etc/tidegate" });
  assertEquals(config.models[0].kv.batchSize, 128);
  assertEquals(config.models[0].kv.downWindowMs, 30_000);
  assertEquals(config.models[0].instances[0].role, "neutral");
  assertEquals(config.limits.maxBodyBytes, 32 * 1024 * 1024);
  assertEquals(config.limits.maxRetries, 2);
  assertEquals(config.models[0].tokenizer.path, "/etc/tidegate/tok");
  assert(Object.isFrozen(config.models[0].kv));
});

Deno.test("resolveConfig() reports every problem with its field path", () => {
  const bad = structuredClone(ISSUE_EXAMPLE) as Mutable;
  bad.models[0].kv.hash = "md5";
  bad.models[0].kv.chunkSize = 0;
  bad.models[0].instances[0].url = "ftp://x";
  bad.models[0].instances.push({ id: "gpu-a", url: "http://127.0.0.1:8002" });
  bad.models[0].surprise = true;
  const problems = problemsOf(() => resolveConfig(bad));
  const paths = problems.map((p) => p.split(":")[0]);
  for (
    const path of [
      "models[0].kv.hash",
      "models[0].kv.chunkSize",
      "models[0].instances[0].url",
      "models[0].surprise",
    ]
  ) assert(paths.includes(path), `${path} missing from ${JSON.stringify(problems)}`);
});

Deno.test("resolveConfig() rejects duplicate ids, a missing store url and a missing tokenizer", () => {
  const bad = structuredClone(ISSUE_EXAMPLE) as Mutable;
  bad.models[0].instances.push({ id: "gpu-a", url: "http://127.0.0.1:8002" });
  delete bad.models[0].kv.url;
  delete bad.models[0].tokenizer;
  const problems = problemsOf(() => resolveConfig(bad));
  assert(
    problems.some((p) => p.startsWith("models[0].instances[1].id: duplicate")),
    problems.join("\n"),
  );
  assert(problems.some((p) => p.startsWith("models[0].kv.url: required")), problems.join("\n"));
  assert(
    problems.some((p) => p.startsWith("models[0].tokenizer.path: required")),
    problems.join("\n"),
  );
});

Deno.test("resolveConfig() refuses an instance id over 128 characters", () => {
  const bad = structuredClone(ISSUE_EXAMPLE) as Mutable;
  bad.models[0].instances.push({ id: "g".repeat(129), url: "http://127.0.0.1:8002" });
  const problems = problemsOf(() => resolveConfig(bad));
  assert(
    problems.some((p) => p.startsWith("models[0].instances[1].id: Too big")),
    problems.join("\n"),
  );
});

Deno.test("resolveConfig() takes kv.url as one master or every master of an HA group, no duplicates", () => {
  const one = structuredClone(ISSUE_EXAMPLE) as Mutable;
  const url = one.models[0].kv.url;
  assertEquals(resolveConfig(one).models[0].kv.url, url);
  const group = structuredClone(ISSUE_EXAMPLE) as Mutable;
  group.models[0].kv.url = ["http://10.0.0.8:9003", "http://10.0.0.9:9003"];
  assertEquals(resolveConfig(group).models[0].kv.url, [
    "http://10.0.0.8:9003",
    "http://10.0.0.9:9003",
  ]);
  const twice = structuredClone(ISSUE_EXAMPLE) as Mutable;
  twice.models[0].kv.url = ["http://10.0.0.8:9003", "http://10.0.0.8:9003"];
  assertEquals(problemsOf(() => resolveConfig(twice)), [
    "models[0].kv.url: lists the same master twice",
  ]);
  const empty = structuredClone(ISSUE_EXAMPLE) as Mutable;
  empty.models[0].kv.url = [];
  assert(problemsOf(() => resolveConfig(empty)).some((p) => p.startsWith("models[0].kv.url")));
});

Deno.test("resolveConfig() reads an admin token from the environment and fails when it is unset", () => {
  const withToken = { ...structuredClone(ISSUE_EXAMPLE), admin: { token: "env:TG_TOKEN" } };
  const config = resolveConfig(withToken, {
    env: (n) => (n === "TG_TOKEN" ? "s3cret" : undefined),
  });
  assertEquals(config.admin.token, "s3cret");
  const problems = problemsOf(() =>
    resolveConfig(structuredClone(withToken), { env: () => undefined })
  );
  assertEquals(problems, ["admin.token: environment variable TG_TOKEN is not set or empty"]);
});

Deno.test("parseConfigText() reads YAML and names the file when the syntax is wrong", () => {
  const yaml = `
models:
  - name: m
    tokenizer: {mode: none}
    kv: {store: none}
    instances:
      - {id: a, url: "http://127.0.0.1:9"}
`;
  const config = parseConfigText(yaml, "router.yaml");
  assertEquals(config.models[0].tokenizer.mode, "none");
  assertThrows(() => parseConfigText("{not json", "router.json"), ConfigError, "router.json");
});

Deno.test("resolveConfig() reads the shared-state Redis URL from the environment and refuses other schemes", () => {
  const shared = (redis: string) => ({
    ...structuredClone(ISSUE_EXAMPLE),
    cluster: { sharedState: { redis } },
  });
  const config = resolveConfig(shared("env:TG_REDIS"), {
    env: (n) => (n === "TG_REDIS" ? "redis://10.0.0.5:6379" : undefined),
  });
  assertEquals(config.cluster.sharedState?.redis, "redis://10.0.0.5:6379");
  assertEquals(config.cluster.sharedState?.prefix, "tidegate");
  assertEquals(problemsOf(() => resolveConfig(shared("env:TG_REDIS"), { env: () => undefined })), [
    "cluster.sharedState.redis: environment variable TG_REDIS is not set or empty",
  ]);
  const refused = problemsOf(() => resolveConfig(shared("http://10.0.0.5:6379")));
  assertEquals(refused.length, 1);
  assert(refused[0].startsWith("cluster.sharedState.redis"), refused[0]);
});

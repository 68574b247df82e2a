/** `start --check`: the verdict on a config file, without listening. */
import { assert, assertEquals, assertMatch } from "../assert.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

async function writeConfig(config: unknown): Promise<string> {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/router.json`;
  await Deno.writeTextFile(path, JSON.stringify(config));
  return path;
}

async function start(args: string[], env: Record<string, string> = {}) {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "cli/main.ts", "start", ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code: output.code, stdout: text(output.stdout), stderr: text(output.stderr) };
}

const model = (fields: Record<string, unknown> = {}) => ({
  name: "qwen3",
  tokenizer: { path: "builtin:qwen3" },
  kv: { url: "http://127.0.0.1:9003" },
  instances: [{ id: "gpu-a", url: "http://127.0.0.1:8001" }],
  ...fields,
});

Deno.test("start --check passes a good file with a summary, exit 0, and never listens", async () => {
  // The configured port is taken: a check that tried to listen would fail.
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = (taken.addr as Deno.NetAddr).port;
    const path = await writeConfig({ listen: { port }, models: [model()] });
    const { code, stdout, stderr } = await start(["--check", "--config", path]);
    assertEquals(code, 0, stderr);
    assertMatch(stdout, new RegExp(`: OK \\(listen 127\\.0\\.0\\.1:${port}, 1 model\\)`));
    assertMatch(stdout, /qwen3: affinity_ttft, 1 instance, tokenizer builtin:qwen3, keys llumnix/);
    assertMatch(stdout, /store http:\/\/127\.0\.0\.1:9003\n/, "llumnix keys: engines do not load");
    assertEquals(stderr.includes("tidegate listening"), false);
  } finally {
    taken.close();
  }
});

Deno.test("start --check says when the key format means the engines load from the store", async () => {
  const kv = {
    url: "http://127.0.0.1:9003",
    keyFormat: "vllm-mooncake-store",
    keyParams: { model: "Qwen3-8B" },
  };
  const path = await writeConfig({ models: [model({ kv })] });
  const { code, stdout, stderr } = await start(["--check", "--config", path]);
  assertEquals(code, 0, stderr);
  assertMatch(
    stdout,
    /keys vllm-mooncake-store .*store http:\/\/127\.0\.0\.1:9003 \(engines load from it\)/,
  );
});

Deno.test("start --check lists every problem of a file and exits 2", async () => {
  const path = await writeConfig({
    admin: { token: "env:TIDEGATE_CHECK_TEST_UNSET" },
    listn: { port: 1 },
    models: [model({ policy: "cache_awre" })],
  });
  const { code, stdout, stderr } = await start(["--check", "--config", path]);
  assertEquals(code, 2, stdout);
  assertMatch(stderr, /3 problems:/);
  assertMatch(stderr, /admin\.token: environment variable TIDEGATE_CHECK_TEST_UNSET is not set/);
  assert(stderr.includes('listn: unknown field (did you mean "listen"?)'), stderr);
  assert(stderr.includes('(did you mean "cache_aware"?)'), stderr);
  assertEquals(stdout, "");
});

Deno.test("start --check goes on past unset environment values to every model's tokenizer", async () => {
  const path = await writeConfig({
    admin: { token: "env:TIDEGATE_CHECK_TEST_UNSET" },
    models: [
      model({ tokenizer: { path: "/nonexistent/tokenizer-dir" } }),
      model({ name: "other", tokenizer: { path: "builtin:qwen" } }),
    ],
  });
  const { code, stderr } = await start(["--check", "--config", path]);
  assertEquals(code, 2);
  assertMatch(stderr, /admin\.token: environment variable TIDEGATE_CHECK_TEST_UNSET is not set/);
  assertMatch(stderr, /models\[0\] \(qwen3\): Cannot load tokenizer: .*nonexistent/);
  assertMatch(stderr, /models\[1\] \(other\): Cannot load tokenizer: unknown builtin "qwen"/);
  assertMatch(stderr, /3 problems:/);
});

Deno.test("start refuses an unknown --log-level or TIDEGATE_LOG_LEVEL with exit 2", async () => {
  const path = await writeConfig({ models: [model()] });
  const flag = await start(["--config", path, "--log-level", "loud"]);
  assertEquals(flag.code, 2);
  assertMatch(flag.stderr, /--log-level must be one of debug, info, warn, error, got "loud"/);
  const env = await start(["--config", path], { TIDEGATE_LOG_LEVEL: "verbose" });
  assertEquals(env.code, 2);
  assertMatch(env.stderr, /TIDEGATE_LOG_LEVEL must be one of/);
});

import { assert, assertEquals, assertMatch } from "../assert.ts";
import { runKeys } from "../../cli/keys.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import { startFakeMooncakeMaster } from "../../src/fakes/fake_mooncake_master.ts";

async function withConfig(
  masterUrl: string,
  fn: (path: string) => Promise<void>,
  tokenizer: Record<string, unknown> = { mode: "none" },
) {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/router.json`;
  await Deno.writeTextFile(
    path,
    JSON.stringify({
      models: [{
        name: "m",
        tokenizer,
        kv: { store: "mooncake", url: masterUrl, chunkSize: 4, minPromptTokens: 0 },
        instances: [
          { id: "gpu-a", url: "http://127.0.0.1:9", kvHost: "10.0.0.1" },
          { id: "gpu-b", url: "http://127.0.0.1:9", kvHost: "10.0.0.2" },
        ],
      }],
    }),
  );
  try {
    await fn(path);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("keys --probe shows each chunk's key, where it lives, and the prefixes per instance", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    const tokens = Array.from({ length: 18 }, (_, i) => i + 1); // 4 full chunks of 4
    const keys = createKeyScheme({
      hash: "sha256_cbor",
      seed: "0",
      chunkSize: 4,
      keyFormat: "llumnix",
    })
      .keys(tokens);
    master.put(keys[0], "10.0.0.1:1");
    master.put(keys[1], "10.0.0.1:1");
    master.put(keys[2], "10.0.0.2:1"); // present, but not local to gpu-a
    await withConfig(master.url, async (path) => {
      const lines: string[] = [];
      const code = await runKeys(
        ["--config", path, "--model", "m", "--tokens", tokens.join(","), "--probe", "--json"],
        (line) => lines.push(line),
      );
      assertEquals(code, 0);
      const report = JSON.parse(lines.join("\n"));
      assertEquals(report.tokens, 18);
      assertEquals(report.chunks.map((c: { keys: string[] }) => c.keys[0]), keys);
      assertEquals(report.chunks.map((c: { present: boolean }) => c.present), [
        true,
        true,
        true,
        false,
      ]);
      assertEquals(report.chunks[2].instances, ["gpu-b"]);
      assertEquals(report.probe.outcome, "ok");
      assertEquals(report.probe.poolPrefixTokens, 12);
      assertEquals(report.probe.localPrefixTokens, { "gpu-a": 8, "gpu-b": 0 });

      const text: string[] = [];
      await runKeys(
        ["--config", path, "--tokens", tokens.join(","), "--probe"],
        (l) => text.push(l),
      );
      assertMatch(text[0], /18 tokens, 4 full chunk\(s\) of 4/);
      assertMatch(text.join("\n"), /local prefix gpu-a: 8 tokens/);
      assert(text.some((l) => l.startsWith("#3 ") && l.endsWith("missing")));
    });
  } finally {
    await master.close();
  }
});

Deno.test("keys --probe against a store it cannot reach says so and exits non-zero, marking no chunk missing", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const deadPort = (listener.addr as Deno.NetAddr).port;
  listener.close(); // nothing listens there now: connection refused
  await withConfig(`http://127.0.0.1:${deadPort}`, async (path) => {
    const quiet = console.error;
    const errors: string[] = [];
    console.error = (message: string) => errors.push(message);
    try {
      const tokens = Array.from({ length: 8 }, (_, i) => i + 1).join(",");
      const text: string[] = [];
      const code = await runKeys(
        ["--config", path, "--tokens", tokens, "--probe"],
        (l) => text.push(l),
      );
      assertEquals(code, 3);
      assert(!text.some((l) => l.endsWith("missing")), text.join("\n"));
      assertMatch(text.join("\n"), /store lookup: failed .*could not be asked/s);
      assertMatch(errors.join("\n"), /store could not be asked \(.*127\.0\.0\.1/);
      const json: string[] = [];
      assertEquals(
        await runKeys(
          ["--config", path, "--tokens", tokens, "--probe", "--json"],
          (l) => json.push(l),
        ),
        3,
      );
      const report = JSON.parse(json.join("\n"));
      assertEquals(report.chunks.map((c: { present?: boolean }) => c.present), [
        undefined,
        undefined,
      ]);
    } finally {
      console.error = quiet;
    }
  });
});

Deno.test("keys tokenizes a prompt with the configured tokenizer", async () => {
  await withConfig("http://127.0.0.1:9", async (path) => {
    const lines: string[] = [];
    const code = await runKeys(
      ["--config", path, "--prompt", "Hello, how are you?", "--json"],
      (line) => lines.push(line),
    );
    assertEquals(code, 0);
    const report = JSON.parse(lines.join("\n"));
    assertEquals(report.tokens, 6); // golden: [9707, 11, 1246, 525, 498, 30]
    assertEquals(report.chunks.length, 1);
  }, { path: "builtin:qwen3" });
});

Deno.test("keys rejects a missing input and an unknown model with exit code 2", async () => {
  await withConfig("http://127.0.0.1:9", async (path) => {
    const quiet = console.error;
    console.error = () => {};
    try {
      assertEquals(await runKeys(["--config", path], () => {}), 2);
      assertEquals(await runKeys(["--config", path, "--model", "x", "--tokens", "1"], () => {}), 2);
      assertEquals(await runKeys(["--config", path, "--tokens", "1,-2"], () => {}), 2);
    } finally {
      console.error = quiet;
    }
  });
});

Deno.test("keys reads only the model's sections: an unset env var for the admin token, Redis or tenants is not required", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/router.json`;
    await Deno.writeTextFile(
      path,
      JSON.stringify({
        admin: { token: "env:TIDEGATE_TEST_UNSET_TOKEN" },
        models: [{
          name: "m",
          tokenizer: { mode: "none" },
          kv: { store: "none", chunkSize: 4, minPromptTokens: 0 },
          instances: [{ id: "a", url: "http://127.0.0.1:9" }],
        }],
      }),
    );
    const lines: string[] = [];
    const code = await runKeys(
      ["--config", path, "--tokens", "1,2,3,4,5", "--json"],
      (line) => lines.push(line),
    );
    assertEquals(code, 0, lines.join("\n"));
    assertEquals(JSON.parse(lines.join("\n")).chunks.length, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("keys: a tokenizer that cannot be loaded is a config problem (exit 2) naming the model", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/router.json`;
    await Deno.writeTextFile(
      path,
      JSON.stringify({
        models: [{
          name: "m",
          tokenizer: { mode: "local", path: `${dir}/no-such-tokenizer` },
          kv: { store: "none" },
          instances: [{ id: "a", url: "http://127.0.0.1:9" }],
        }],
      }),
    );
    const errors: string[] = [];
    const consoleError = console.error;
    console.error = (line: string) => errors.push(line);
    let code: number;
    try {
      code = await runKeys(["--config", path, "--prompt", "hello"], () => {});
    } finally {
      console.error = consoleError;
    }
    assertEquals(code, 2, errors.join("\n"));
    assertMatch(errors.join("\n"), /models\[0\] \(m\)/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

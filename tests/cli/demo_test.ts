import { assert, assertEquals, assertMatch } from "../assert.ts";
import { demoChat, runDemoBurst } from "../../cli/demo.ts";
import { loadConfigFile, resolveConfig } from "../../src/config/load.ts";
import { runKeys } from "../../cli/keys.ts";
import { createRouter } from "../../routes/app.ts";
import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";
import { startDemoCluster } from "../../src/fakes/demo_cluster.ts";

Deno.test("demo: a long shared-prefix chat lands on the instance that holds the prefix, and says so", async () => {
  const cluster = await startDemoCluster({ engines: 3 });
  const router = await createRouter(resolveConfig(cluster.routerConfig()), { log: () => {} });
  assert(await router.warm(), "worker threads loaded");
  const { port } = await router.serve({ port: 0 });
  const url = `http://127.0.0.1:${port}`;
  try {
    const results = await runDemoBurst(url, cluster.model, 3, 2);
    assert(results.every((r) => r.status === 200));
    const home = new Map(results.slice(0, 3).map((r) => [r.doc, r.instance]));
    assertEquals(
      new Set(home.values()).size,
      3,
      "three cold documents spread over three instances",
    );
    for (const r of results.slice(3)) {
      assertEquals(r.instance, home.get(r.doc), `doc${r.doc} follow-up`);
      assert(r.hitTokens >= 2048, `follow-up hit ${r.hitTokens} of ${r.promptTokens}`);
    }

    // What the README's curl does: a non-streaming chat sharing document 0's prefix.
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        ...demoChat(cluster.model, 0, "What does chapter 2 say?"),
        stream: false,
      }),
    });
    assertEquals(response.status, 200);
    assertEquals(response.headers.get("x-tidegate-instance"), home.get(0));
    const body = await response.json();
    const predicted = Number(response.headers.get("x-tidegate-hit-tokens"));
    // The engine hashed the same tokens the same way: it reports exactly the predicted reuse.
    assertEquals(body.usage.prompt_tokens_details.cached_tokens, predicted);

    const samples = parsePrometheusText(await (await fetch(`${url}/metrics`)).text()).samples;
    const total = (name: string) =>
      samples.filter((s) => s.name === name).reduce((sum, s) => sum + s.value, 0);
    assert(total("tidegate_engine_cached_tokens_total") > 0);
    assertEquals(total("tidegate_hit_mismatch_tokens_total"), 0);
  } finally {
    await router.close();
    await cluster.close();
  }
});

async function runDemoProcess(...args: string[]) {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("../../cli/main.ts", import.meta.url).pathname, "demo", ...args],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code: output.code, stdout: decode(output.stdout), stderr: decode(output.stderr) };
}

async function demoRequestFiles(): Promise<string[]> {
  const dir = Deno.env.get("TMPDIR") ?? "/tmp";
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.name.startsWith("tidegate-demo-")) names.push(entry.name);
  }
  return names.sort();
}

Deno.test("demo --policy with an unknown name exits 2 with the message before starting anything", async () => {
  const { code, stdout, stderr } = await runDemoProcess("--policy", "bogus", "--port", "0");
  assertEquals(code, 2);
  assert(stderr.includes('Unknown scheduling policy "bogus"'), stderr);
  assert(!stderr.includes("    at "), `no stack trace: ${stderr}`);
  assert(!stdout.includes("Starting the embedded cluster"), stdout);
});

Deno.test("demo --exit serves the burst, prints the summary, offers nothing to try and leaves no file behind", async () => {
  const before = await demoRequestFiles();
  const { code, stdout, stderr } = await runDemoProcess("--exit", "--port", "0", "--engines", "2");
  assertEquals(code, 0, stderr);
  assert(stdout.includes("follow-ups landed on the instance holding their document"), stdout);
  assert(!stdout.includes("curl"), `no curl for a router that is gone: ${stdout}`);
  assert(!stdout.includes("Ctrl-C"), stdout);
  assert(stdout.includes("--exit: stopping"), stdout);
  assertEquals(await demoRequestFiles(), before, "no request file was left");
  assert(!stderr.includes('"msg":"request"'), `quiet by default: no access log\n${stderr}`);
});

Deno.test("demo --write-config writes a router config for its cluster that the loader and keys accept", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/demo-router.json`;
    const run = await runDemoProcess(
      "--exit",
      "--port",
      "0",
      "--engines",
      "2",
      "--write-config",
      path,
    );
    assertEquals(run.code, 0, run.stderr);
    assert(run.stdout.includes(`Wrote ${path}`), run.stdout);
    const config = await loadConfigFile(
      path,
      (name) => name === "TIDEGATE_ADMIN_TOKEN" ? "t" : undefined,
    );
    assertEquals(config.listen.port, 8081);
    assertEquals(config.models[0].instances.length, 2);
    const keys: string[] = [];
    assertEquals(
      await runKeys(["--config", path, "--prompt", "hello there", "--json"], (l) => keys.push(l)),
      0,
    );
    assert(JSON.parse(keys.join("\n")).tokens > 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("demo --log-level info shows the access log on stderr, a line per request", async () => {
  const { code, stdout, stderr } = await runDemoProcess(
    "--exit",
    "--port",
    "0",
    "--engines",
    "2",
    "--log-level",
    "info",
  );
  assertEquals(code, 0, stderr);
  const requests = stderr.split("\n").filter((l) => l.includes('"msg":"request"'))
    .map((l) => JSON.parse(l));
  const sent = Number(stdout.match(/(\d+) requests \(/)?.[1]);
  assertEquals(requests.length, sent, stderr);
  assert(requests.every((r) => r.model === "qwen3" && r.status === 200), stderr);
});

Deno.test("demo --pd: follow-ups go to the prefill instance holding their document, and the answer names the pair", async () => {
  for (const protocol of ["vllm-nixl", "sglang"] as const) {
    const cluster = await startDemoCluster({ pd: { protocol, prefill: 2, decode: 2 } });
    const router = await createRouter(resolveConfig(cluster.routerConfig()), { log: () => {} });
    assert(await router.warm(), "worker threads loaded");
    const { port } = await router.serve({ port: 0 });
    const url = `http://127.0.0.1:${port}`;
    try {
      const results = await runDemoBurst(url, cluster.model, 2, 2);
      assert(results.every((r) => r.status === 200), JSON.stringify(results));
      const home = new Map(results.slice(0, 2).map((r) => [r.doc, r.instance]));
      for (const r of results) {
        assert(r.instance.startsWith("prefill-"), r.instance);
        assert(r.decode?.startsWith("decode-"), r.decode);
      }
      for (const r of results.slice(2)) assertEquals(r.instance, home.get(r.doc), protocol);
      const response = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...demoChat(cluster.model, 0, "And chapter 3?"), stream: false }),
      });
      assertEquals(response.status, 200, protocol);
      await response.json();
      assertEquals(response.headers.get("x-tidegate-prefill-instance"), home.get(0));
      assert(response.headers.get("x-tidegate-decode-instance")?.startsWith("decode-"));
    } finally {
      await router.close();
      await cluster.close();
    }
  }
});

Deno.test("demo --pd --exit prints the pairs it used", async () => {
  const { code, stdout, stderr } = await runDemoProcess(
    "--pd",
    "--protocol",
    "vllm-mooncake",
    "--exit",
    "--port",
    "0",
  );
  assertEquals(code, 0, stderr);
  assert(stdout.includes("| pair (prefill → decode) |"), stdout);
  assert(stdout.includes("24 requests (24 OK)"), stdout);
  assert(stdout.includes("disaggregated over vllm-mooncake"), stdout);
});

Deno.test("demo --host listens on the address given (0.0.0.0 in a container)", async () => {
  const { code, stdout, stderr } = await runDemoProcess(
    "--exit",
    "--host",
    "127.0.0.2",
    "--port",
    "0",
    "--engines",
    "2",
  );
  assertEquals(code, 0, stderr);
  assertMatch(stdout, /on http:\/\/127\.0\.0\.2:\d+\./);
  // The burst went to that address and every request was served there.
  assertMatch(stdout, /(\d+) requests \(\1 OK\)/);
});

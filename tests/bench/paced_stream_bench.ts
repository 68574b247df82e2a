/**
 * What a streamed answer costs the router per token when the engine paces its tokens, as real
 * engines do: `deno task bench:paced`. An engine stub (tests/bench/paced/engine_stub.ts) writes
 * each SSE event on its own, `--gap-ms` apart; in front of it, each in its own process, the bare
 * Deno proxy (tests/bench/overhead/bare_proxy.ts: the runtime's floor, whose `Deno.serve` relays
 * the engine's body without JavaScript per chunk) and tidegate with each of its listeners. One
 * client sends requests one after another: streamed answers of 16 and 128 tokens and a
 * non-streamed one. Prints each router's CPU per request (all its threads, from /proc), the CPU
 * per streamed token ((128-token − 16-token) ÷ 112), and its CPU per second while idle (all
 * targets over the same 5 s, 45 s after they started).
 */
import { parseArgs } from "node:util";
import {
  cpuMs,
  freePort,
  loadAverage,
  start,
  type Started,
  stop,
  waitFor,
} from "./overhead/procs.ts";

const USAGE = `Usage: deno task bench:paced [--requests N] [--gap-ms MS]

  --requests N  requests per measurement (default 20; 5 more warm each router up first)
  --gap-ms MS   the engine stub's pause between two events (default 2)`;

const { values } = parseArgs({
  args: Deno.args,
  options: {
    requests: { type: "string" },
    "gap-ms": { type: "string" },
    help: { type: "boolean" },
  },
});
if (values.help) {
  console.log(USAGE);
  Deno.exit(0);
}
const REQUESTS = Number(values.requests ?? 20);
const GAP_MS = Number(values["gap-ms"] ?? 2);
if (!(REQUESTS >= 1) || !(GAP_MS >= 0)) {
  console.error(USAGE);
  Deno.exit(2);
}

const ROOT = new URL("../../", import.meta.url).pathname;
const logDir = await Deno.makeTempDir({ prefix: "tidegate-paced-" });
const deno = Deno.execPath();

interface Target {
  name: string;
  port: number;
  proc: Started;
}

async function startTargets(enginePort: number): Promise<Target[]> {
  const targets: Target[] = [];
  const barePort = freePort();
  const upstreams = JSON.stringify({ m: `http://127.0.0.1:${enginePort}` });
  targets.push({
    name: "bare Deno proxy",
    port: barePort,
    proc: await start("bare", deno, [
      "run",
      "-A",
      "tests/bench/overhead/bare_proxy.ts",
      "--port",
      String(barePort),
      "--upstreams",
      upstreams,
    ], { cwd: ROOT, logDir }),
  });
  for (const server of ["node", "deno"]) {
    const port = freePort();
    const config = `${logDir}/tidegate-${server}.json`;
    await Deno.writeTextFile(config, JSON.stringify(routerConfig(port, server, enginePort)));
    const proc = await start(`tidegate-${server}`, deno, [
      "run",
      "-A",
      "cli/main.ts",
      "start",
      "--config",
      config,
    ], { cwd: ROOT, logDir });
    targets.push({ name: `tidegate, listen.server ${server}`, port, proc });
  }
  for (const target of targets) {
    if (!await waitFor(`http://127.0.0.1:${target.port}/healthz`, 30_000, (s) => s < 500)) {
      throw new Error(`${target.name} did not start: ${target.proc.log}`);
    }
  }
  return targets;
}

function routerConfig(port: number, server: string, enginePort: number) {
  return {
    listen: { host: "127.0.0.1", port, server },
    models: [{
      name: "m",
      tokenizer: { mode: "none" },
      kv: { store: "none" },
      health: { intervalMs: 1_000, timeoutMs: 2_000 },
      instances: [{ id: "e0", url: `http://127.0.0.1:${enginePort}` }],
    }],
  };
}

async function ask(port: number, stream: boolean, tokens: number): Promise<void> {
  const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "m",
      stream,
      max_tokens: tokens,
      messages: [{ role: "user", content: "Say something." }],
    }),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${response.status}: ${text}`);
  if (stream && !text.includes(` t${tokens}"`)) {
    throw new Error(`a cut answer: ${text.slice(-200)}`);
  }
}

/** CPU ms per request of `target`'s process over REQUESTS requests (after 5 to warm up). */
async function cpuPerRequest(target: Target, stream: boolean, tokens: number): Promise<number> {
  for (let i = 0; i < 5; i++) await ask(target.port, stream, tokens);
  const before = await cpuMs(target.proc.pid);
  for (let i = 0; i < REQUESTS; i++) await ask(target.port, stream, tokens);
  return ((await cpuMs(target.proc.pid)) - before) / REQUESTS;
}

/**
 * Every target's CPU per second over the same 5 s, from 45 s after they started: V8 compacts the
 * heap a start-up left 30-40 s after it (collections of 5-67 ms, seen with `--trace-gc`), which
 * is start-up's cost, not idling's.
 */
async function idleCpuPerSecond(targets: Target[], startedAt: number): Promise<number[]> {
  const settle = startedAt + 45_000 - performance.now();
  if (settle > 0) await new Promise((resolve) => setTimeout(resolve, settle));
  const before = await Promise.all(targets.map((t) => cpuMs(t.proc.pid)));
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  const after = await Promise.all(targets.map((t) => cpuMs(t.proc.pid)));
  return after.map((ms, i) => (ms - before[i]) / 5);
}

const enginePort = freePort();
const engine = await start("engine", deno, [
  "run",
  "-A",
  "tests/bench/paced/engine_stub.ts",
  "--port",
  String(enginePort),
  "--gap-ms",
  String(GAP_MS),
], { cwd: ROOT, logDir });
let targets: Target[] = [];
try {
  if (!await waitFor(`http://127.0.0.1:${enginePort}/health`, 30_000)) {
    throw new Error(`the engine stub did not start: ${engine.log}`);
  }
  const startedAt = performance.now();
  targets = await startTargets(enginePort);
  const idle = await idleCpuPerSecond(targets, startedAt);
  console.log(`# bench:paced, ${new Date().toISOString()}, load average ${loadAverage()}`);
  console.log(
    `# ${REQUESTS} requests a cell, one at a time; the engine stub ${GAP_MS} ms between events`,
  );
  console.log(
    "| router | idle CPU ms/s | streamed 16 tokens | streamed 128 tokens | per streamed token | not streamed |",
  );
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const [i, target] of targets.entries()) {
    const short = await cpuPerRequest(target, true, 16);
    const long = await cpuPerRequest(target, true, 128);
    const plain = await cpuPerRequest(target, false, 128);
    const perToken = ((long - short) / 112) * 1000;
    console.log(
      `| ${target.name} | ${idle[i].toFixed(1)} | ${short.toFixed(2)} ms | ${
        long.toFixed(2)
      } ms | ` +
        `${perToken.toFixed(0)} µs | ${plain.toFixed(2)} ms |`,
    );
  }
  console.log(`# load average after: ${loadAverage()}`);
} finally {
  for (const target of targets) await stop(target.proc);
  await stop(engine);
}

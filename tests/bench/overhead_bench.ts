/**
 * The router's own cost per request, against references measured in the same run, on loopback:
 * `deno task bench:overhead [--seconds 10] [--mixes tokens8k,short] [--profile DIR] [--retries 2]`
 * (`--help` lists every flag). On a shared machine `--retries 2` repeats any run during which
 * other processes used CPU (measured from /proc/stat), keeping the quietest attempt.
 *
 * nginx (Debian's `nginx`; this benchmark installs nothing) plays the engine and the Mooncake master
 * (tests/bench/overhead/stubs.ts), and, as a second instance, a plain reverse proxy in front of
 * the engine. wrk drives each request mix (tests/bench/overhead/workloads.ts) for the same time
 * at the same concurrency against four targets:
 *
 * - direct: the engine stub itself (no proxy at all);
 * - nginx: the reverse proxy (the reference a router is measured against);
 * - deno-bare: a bare Deno server that parses the JSON body and forwards it with fetch
 *   (tests/bench/overhead/bare_proxy.ts): the runtime's floor;
 * - tidegate: `deno run -A cli/main.ts start` (a fresh process per mix) with cache-aware dispatch,
 *   the Qwen3 tokenizer, sha256_cbor keys and the store lookup against the stub master (every key
 *   absent).
 * - tidegate-mirror: the same with `kv.masterEvents` on a publisher that publishes nothing
 *   (tests/bench/overhead/silent_publisher.ts): its mirror of the empty pool is exact, so requests
 *   skip the lookup round trip (1% are still looked up to cross-check the mirror).
 * - smg-cache_aware, smg-round_robin: the SGLang Model Gateway (the peer router, pinned in
 *   tests/support/smg.ts, installed by tests/real/setup.sh; a fresh process per mix) over the
 *   same instances with its cache-aware policy and with round robin. It does not tokenize over
 *   HTTP workers: its cache-aware tree is keyed on the request text (tests/support/smg.ts).
 *   `--without-smg` leaves it out. Its lookup deadline is 1000 ms here (`--kv-timeout-ms`): at saturation the config's
 *   50 ms is missed, the store is then skipped for its down-window, and the run would measure
 *   load-only dispatch instead of the lookup path (the benchmark says so when it happens).
 *
 * Per mix and target: req/s, p50/p99 latency, and the proxy's CPU milliseconds per request
 * (utime + stime from /proc, all threads and child processes), each as a ratio to nginx and to
 * direct. `--profile DIR` then runs the router under `--cpu-prof` on the 8k token-id mix and
 * ranks its functions by self time (tests/bench/overhead/cpuprofile.ts).
 *
 * Every process started here is stopped by its pid before exit, also on Ctrl-C.
 */
import { parseArgs } from "node:util";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import { formatInclusive, formatSummary, summarizeProfile } from "./overhead/cpuprofile.ts";
import {
  cpuMs,
  freePort,
  loadAverage,
  machineBusyMs,
  ownCpuMs,
  start,
  type Started,
  stop,
  waitFor,
} from "./overhead/procs.ts";
import { eventually } from "../support/eventually.ts";
import { commandMissing } from "../support/needs_tool.ts";
import { type SilentPublisher, startSilentPublisher } from "./overhead/silent_publisher.ts";
import { INSTANCES, proxyConfig, stubConfig, type StubPorts } from "./overhead/stubs.ts";
import {
  SMG_PATH,
  SMG_VERSION,
  smgLaunchArgs,
  smgMissing,
  type SmgPolicy,
  waitForSmgWorkers,
} from "../support/smg.ts";
import { buildMixes, MARKER, type Mix, MIX_NAMES } from "./overhead/workloads.ts";

const USAGE = `Usage: deno task bench:overhead [--seconds N] [--mixes a,b] [--connections N]
       [--threads N] [--profile DIR] [--profile-mix M] [--profile-mirror] [--kv-timeout-ms N]
       [--retries N] [--max-other-load X] [--without-smg] [--keep]

  --seconds N      measured seconds per mix and target (default 10; a warm-up comes first)
  --mixes a,b      among tokens8k, chat8k-new, chat-growing, short, sse256, sse500 (default all)
  --connections N  wrk connections (default 32; sse500 always uses 500)
  --threads N      wrk threads (default 1)
  --profile DIR    afterwards, run the router under --cpu-prof on one mix, write the
                   .cpuprofile to DIR and print its top functions by self time
  --profile-mix M  the mix profiled (default tokens8k)
  --profile-mirror profile the tidegate-mirror configuration (no lookup round trips) instead
  --kv-timeout-ms N  the router's store lookup deadline (default 1000; the config's default, 50,
                   is missed at saturation and the store then skipped: see the notes it prints)
  --retries N      on a shared machine: repeat a run (after waiting up to 30 s for quiet) when
                   other processes used more than --max-other-load cores during it, keeping the
                   quietest attempt (default 0: every run once, about 5 minutes in all)
  --max-other-load X  cores other processes may use during a run (default 0.15)
  --without-smg    leave out the SGLang Model Gateway (otherwise it must be installed:
                   npx -y deno@2.9.6 task setup:real)
  --keep           keep the temp directory (configs, bodies, logs)`;

const REPO = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const LUA = new URL("./overhead/post.lua", import.meta.url).pathname;
const BARE = new URL("./overhead/bare_proxy.ts", import.meta.url).pathname;
/** `tidegate` runs with the config's default tokenizer workers (one per core); `tidegate-w0` with
 * `workers: 0` (everything on the main loop), the single-threaded reference of the pool;
 * `tidegate-deno` with `listen.server: "deno"` (Deno.serve), the reference of the default
 * node:http listener's cost. */
const ALL_TARGETS = [
  "direct",
  "nginx",
  "deno-bare",
  "tidegate",
  "tidegate-w0",
  "tidegate-deno",
  "tidegate-mirror",
  "smg-cache_aware",
  "smg-round_robin",
] as const;
type Target = typeof ALL_TARGETS[number];
const SMG_TARGETS: Partial<Record<Target, SmgPolicy>> = {
  "smg-cache_aware": "cache_aware",
  "smg-round_robin": "round_robin",
};

interface WrkResult {
  requests: number;
  duration_us: number;
  p50_us: number;
  p99_us: number;
  connect: number;
  read: number;
  write: number;
  status: number;
  timeout: number;
}

interface Measured {
  rps: number;
  p50: number;
  p99: number;
  /** CPU ms per request of the proxy process tree (none for direct). */
  cpu?: number;
  errors: number;
  requests: number;
  /** Cores used by processes this benchmark did not start, on average during the run. */
  foreign: number;
}

interface StageDelta {
  stages: Record<string, number>;
  lookups: Record<string, number>;
  statuses: Record<string, number>;
  tokenizerFailures: number;
}

// ---------------------------------------------------------------------------------------------

const parsed = (() => {
  try {
    return parseArgs({
      args: Deno.args,
      options: {
        seconds: { type: "string", default: "10" },
        mixes: { type: "string" },
        connections: { type: "string", default: "32" },
        threads: { type: "string", default: "1" },
        profile: { type: "string" },
        "profile-mix": { type: "string", default: "tokens8k" },
        "profile-mirror": { type: "boolean", default: false },
        "kv-timeout-ms": { type: "string", default: "1000" },
        retries: { type: "string", default: "0" },
        "max-other-load": { type: "string", default: "0.15" },
        keep: { type: "boolean", default: false },
        "without-smg": { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    }).values;
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${USAGE}`);
    Deno.exit(2);
  }
})();
if (parsed.help) {
  console.log(USAGE);
  Deno.exit(0);
}
const SECONDS = Number(parsed.seconds);
const CONNECTIONS = Number(parsed.connections);
const THREADS = Number(parsed.threads);
const KV_TIMEOUT_MS = Number(parsed["kv-timeout-ms"]);
const RETRIES = Math.max(0, Math.floor(Number(parsed.retries) || 0));
const MAX_OTHER_LOAD = Number(parsed["max-other-load"]);
if (!(SECONDS >= 1) || !(CONNECTIONS >= 1) || !(THREADS >= 1) || !(KV_TIMEOUT_MS >= 1)) {
  console.error(
    `--seconds, --connections, --threads and --kv-timeout-ms take positive numbers.\n\n${USAGE}`,
  );
  Deno.exit(2);
}

const TARGETS = ALL_TARGETS.filter((t) => !(parsed["without-smg"] && SMG_TARGETS[t]));
const missing = [
  await commandMissing("nginx", ["-v"], "apt-get install -y nginx"),
  await commandMissing("wrk", ["--version"], "apt-get install -y wrk", { anyExit: true }),
  parsed["without-smg"] ? undefined : await smgMissing(),
].filter((why) => why !== undefined);
if (missing.length > 0) {
  console.error(
    `bench:overhead needs nginx, wrk and smg (or --without-smg): ${missing.join("; ")}`,
  );
  Deno.exit(2);
}

const started: Started[] = [];
let publisher: SilentPublisher | undefined;
let tmp = "";
let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    try {
      activeWrk?.kill("SIGTERM");
    } catch {
      // Already gone.
    }
    for (const proc of started.splice(0).reverse()) await stop(proc);
    await publisher?.stop();
    if (tmp && !parsed.keep) await Deno.remove(tmp, { recursive: true }).catch(() => {});
    else if (tmp) console.error(`kept ${tmp}`);
  })();
  return cleaning;
}
const onSignal = () => {
  console.error("interrupted: stopping everything started");
  cleanup().finally(() => Deno.exit(130));
};
Deno.addSignalListener("SIGINT", onSignal);
Deno.addSignalListener("SIGTERM", onSignal);

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const wanted = parsed.mixes?.split(",").map((s) => s.trim()).filter(Boolean);
  const unknown = wanted?.filter((name) => !(MIX_NAMES as readonly string[]).includes(name)) ?? [];
  if (unknown.length > 0) {
    console.error(`unknown mix ${unknown.join(", ")}: choose among ${MIX_NAMES.join(", ")}`);
    return 2;
  }
  const profileMix = parsed["profile-mix"];
  if (!(MIX_NAMES as readonly string[]).includes(profileMix)) {
    console.error(`--profile-mix: choose among ${MIX_NAMES.join(", ")}`);
    return 2;
  }
  const loadBefore = loadAverage();
  const quiet = await otherLoad(2_000);
  if (quiet > 0.2) {
    console.error(
      `warning: other processes are using ${quiet.toFixed(2)} cores: figures will be noisy`,
    );
  }
  const tokenizer = await loadTokenizer("builtin:qwen3", { fastPath: true, cacheMaxTokens: 0 });
  const all = buildMixes(tokenizer);
  const mixes = wanted ? all.filter((m) => wanted.includes(m.name)) : all;

  tmp = await Deno.makeTempDir({ prefix: "tidegate-overhead-" });
  await Deno.chmod(tmp, 0o755); // nginx workers run as nobody when started by root
  for (const dir of ["stub", "proxy", "bodies"]) {
    await Deno.mkdir(`${tmp}/${dir}`);
    await Deno.chmod(`${tmp}/${dir}`, 0o755);
  }
  for (const mix of mixes) await Deno.writeTextFile(bodiesFile(mix), mix.bodies.join("\n") + "\n");

  const ports = () => Array.from({ length: INSTANCES }, freePort);
  const stub: StubPorts = { engine: ports(), engineSse: ports(), master: freePort() };
  const proxyPorts = { proxy: freePort(), proxySse: freePort() };
  const barePort = freePort();
  await Deno.writeTextFile(`${tmp}/stub/nginx.conf`, await stubConfig(`${tmp}/stub`, stub));
  await Deno.writeTextFile(
    `${tmp}/proxy/nginx.conf`,
    proxyConfig(`${tmp}/proxy`, proxyPorts, stub),
  );

  const nginx = (name: "stub" | "proxy") =>
    launch(name, "nginx", [
      "-p",
      `${tmp}/${name}`,
      "-c",
      `${tmp}/${name}/nginx.conf`,
      "-e",
      `${tmp}/${name}/error.log`,
    ]);
  const stubProc = await nginx("stub");
  publisher = startSilentPublisher();
  const proxyProc = await nginx("proxy");
  const bareProc = await launch("deno-bare", Deno.execPath(), [
    "run",
    "-A",
    BARE,
    "--port",
    String(barePort),
    "--upstreams",
    JSON.stringify({
      "qwen3": `http://127.0.0.1:${stub.engine[0]}`,
      "qwen3-sse": `http://127.0.0.1:${stub.engineSse[0]}`,
    }),
  ]);
  await ready(`http://127.0.0.1:${stub.engine[0]}/health`, stubProc);
  await ready(`http://127.0.0.1:${proxyPorts.proxy}/health`, proxyProc);
  await ready(`http://127.0.0.1:${barePort}/`, bareProc, () => true);

  const versions = await toolVersions();
  const totalRuns = mixes.length * TARGETS.length;
  const estimate = mixes.length * (4 + 2 * 1 + 2 * 2 + TARGETS.length * SECONDS) +
    (parsed.profile ? SECONDS + 12 : 0);
  console.error(
    `${totalRuns} runs of ${SECONDS} s (+ warm-up): about ${
      Math.round(estimate / 60 * 10) / 10
    } min`,
  );

  const results = new Map<string, Measured>();
  const stages = new Map<string, StageDelta>();
  for (const mix of mixes) {
    // A fresh router per mix: no mix inherits another's caches, store health or heap.
    const router = await startRouter(`tidegate-${mix.name}`, stub);
    const inline = await startRouter(`tidegate-w0-${mix.name}`, stub, [], { workers: 0 });
    const denoServe = await startRouter(`tidegate-deno-${mix.name}`, stub, [], { server: "deno" });
    const mirrored = await startRouter(`tidegate-mirror-${mix.name}`, stub, [], {
      masterEvents: publisher.endpoint,
    });
    await waitForExactMirrors(mirrored.url, mirrored.proc);
    const smgs = parsed["without-smg"] ? undefined : {
      cache: await startSmg(`smg-cache_aware-${mix.name}`, stub, "cache_aware"),
      rr: await startSmg(`smg-round_robin-${mix.name}`, stub, "round_robin"),
    };
    const urls: Record<Target, string> = {
      direct: `http://127.0.0.1:${mix.sse ? stub.engineSse[0] : stub.engine[0]}`,
      nginx: `http://127.0.0.1:${mix.sse ? proxyPorts.proxySse : proxyPorts.proxy}`,
      "deno-bare": `http://127.0.0.1:${barePort}`,
      tidegate: router.url,
      "tidegate-w0": inline.url,
      "tidegate-deno": denoServe.url,
      "tidegate-mirror": mirrored.url,
      "smg-cache_aware": smgs?.cache.url ?? "",
      "smg-round_robin": smgs?.rr.url ?? "",
    };
    const procs: Record<Target, Started | undefined> = {
      direct: undefined,
      nginx: proxyProc,
      "deno-bare": bareProc,
      tidegate: router.proc,
      "tidegate-w0": inline.proc,
      "tidegate-deno": denoServe.proc,
      "tidegate-mirror": mirrored.proc,
      "smg-cache_aware": smgs?.cache.proc,
      "smg-round_robin": smgs?.rr.proc,
    };
    for (const target of TARGETS) {
      const problem = await smoke(mix, target, urls[target]);
      if (problem === undefined) continue;
      // A request SMG refuses is a difference to report, not a broken run.
      if (!SMG_TARGETS[target]) throw new Error(`smoke test ${mix.name} → ${target}: ${problem}`);
      refused.set(`${mix.name}/${target}`, problem);
      console.error(`  ${mix.name.padEnd(13)} ${target} refuses the mix: ${problem}`);
    }
    for (const target of TARGETS) {
      if (refused.has(`${mix.name}/${target}`)) continue;
      let best: { measured: Measured; stage?: StageDelta } | undefined;
      for (let attempt = 0; attempt <= RETRIES; attempt++) {
        if (attempt > 0) await waitForQuiet(30_000);
        const once = await measureOnce(mix, target, urls[target], procs[target]);
        if (!best || once.measured.foreign < best.measured.foreign) best = once;
        const m = once.measured;
        console.error(
          `  ${mix.name.padEnd(13)} ${target.padEnd(9)} ${m.rps.toFixed(0)} req/s` +
            ` (other processes: ${m.foreign.toFixed(2)} cores)` +
            (m.errors ? ` (${m.errors} errors)` : "") + (attempt > 0 ? ` [retry ${attempt}]` : ""),
        );
        if (m.foreign <= MAX_OTHER_LOAD) break;
      }
      results.set(`${mix.name}/${target}`, best!.measured);
      if (best!.stage) stages.set(`${mix.name}/${target}`, best!.stage);
    }
    await stopStarted(router.proc);
    await stopStarted(inline.proc);
    await stopStarted(denoServe.proc);
    await stopStarted(mirrored.proc);
    if (smgs) {
      await stopStarted(smgs.cache.proc);
      await stopStarted(smgs.rr.proc);
    }
  }
  const loadAfter = loadAverage();

  console.log(`# tidegate overhead (bench:overhead)\n`);
  console.log(
    `${navigator.hardwareConcurrency} cores; load average ${loadBefore} before, ${loadAfter} ` +
      `after (other processes: ${quiet.toFixed(2)} cores in the 2 s before the first run); ` +
      `${versions}. wrk -t${THREADS} -c${CONNECTIONS} (sse500: -c500), ${SECONDS} s per ` +
      `run after a warm-up; every request a new prompt` +
      (RETRIES > 0
        ? ` (a run during which other processes used more than ${MAX_OTHER_LOAD} cores was ` +
          `repeated, up to ${RETRIES} times, keeping the quietest)`
        : "") +
      ". nginx: one worker each (stub, proxy). " +
      (parsed["without-smg"] ? "" : `SMG ${SMG_VERSION} (smg launch --policy cache_aware | ` +
        `round_robin --log-level warn, a fresh process per mix, over the same ${INSTANCES} ` +
        "instances): no tokenization, its cache-aware tree keyed on the request text, no " +
        "store lookup. ") +
      `tidegate (a fresh process per mix): cache_aware over ${INSTANCES} instances of the stub, ` +
      "builtin:qwen3, sha256_cbor, Mooncake lookup (every key absent), minPromptTokens 1024, " +
      `kv.timeoutMs ${KV_TIMEOUT_MS}` +
      (KV_TIMEOUT_MS === 50 ? " (the config default).\n" : " (the config default is 50).\n"),
  );
  for (const mix of mixes) {
    console.log(`- ${mix.name}: ${mix.description}; ${tokensText(mix.tokens)} prompt tokens`);
  }
  console.log("");
  console.log(fullTable(mixes, results));
  const foreign = [...results].sort((a, b) => b[1].foreign - a[1].foreign);
  const meanForeign = foreign.reduce((sum, [, r]) => sum + r.foreign, 0) / foreign.length;
  console.log(
    `\nProcesses not started by this benchmark used ${meanForeign.toFixed(2)} cores on average ` +
      `during the measured runs (most: ${foreign[0][1].foreign.toFixed(2)}, ${foreign[0][0]}).`,
  );
  console.log("");
  console.log(summaryTable(mixes, results));
  if (!parsed["without-smg"]) {
    console.log("");
    console.log(peerTable(mixes, results));
  }
  console.log("");
  console.log(stageTable(mixes, stages, results));
  for (const [name, s] of stages) {
    const missed = Object.entries(s.lookups).filter(([outcome]) =>
      outcome !== "ok" && outcome !== "skipped" && outcome !== "mirror"
    );
    if (missed.length === 0) continue;
    console.log(
      `\n! ${name}: ${missed.map(([o, n]) => `${n} lookups ${o}`).join(", ")}. At this ` +
        "concurrency the router's event loop was too busy to read the store's answer within " +
        `kv.timeoutMs (${KV_TIMEOUT_MS} ms); after three misses the store is skipped for ` +
        "its down-window (30 s), so these requests were dispatched by load without a lookup " +
        "(a larger `--kv-timeout-ms` measures the lookup path).",
    );
  }
  const failures = [...results].filter(([, r]) => r.errors > 0);
  for (const [key, r] of failures) console.log(`\n! ${key}: ${r.errors} errors in ${r.requests}`);

  if (parsed.profile) {
    // The floor is done: stop it so that the profiled router runs alone.
    await stopStarted(bareProc);
    const mix = all.find((m) => m.name === profileMix)!;
    if (!mixes.includes(mix)) {
      await Deno.writeTextFile(bodiesFile(mix), mix.bodies.join("\n") + "\n");
    }
    console.log("");
    const target = parsed["profile-mirror"] ? "tidegate-mirror" : "tidegate";
    console.log(await profile(mix, parsed.profile, stub, results.get(`${mix.name}/${target}`)));
  }
  return failures.length > 0 ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------

/** Warm-up, then one measured wrk run with the target's CPU and everyone else's load. */
async function measureOnce(
  mix: Mix,
  target: Target,
  url: string,
  proc: Started | undefined,
): Promise<{ measured: Measured; stage?: StageDelta }> {
  const connections = mix.connections ?? CONNECTIONS;
  // nginx needs no JIT warm-up; the Deno targets get two seconds.
  await wrk(mix, url, target === "direct" || target === "nginx" ? 1 : 2, connections);
  const before = target.startsWith("tidegate") ? await scrape(url) : undefined;
  const cpu0 = proc ? await cpuMs(proc.pid) : 0;
  const [busy0, own0, t0] = [await machineBusyMs(), await ownCpuMs(), performance.now()];
  const run = await wrk(mix, url, SECONDS, connections);
  const [busy1, own1, t1] = [await machineBusyMs(), await ownCpuMs(), performance.now()];
  const cpu1 = proc ? await cpuMs(proc.pid) : 0;
  const seconds = run.duration_us / 1e6;
  return {
    measured: {
      rps: run.requests / seconds,
      p50: run.p50_us / 1000,
      p99: run.p99_us / 1000,
      cpu: proc ? (cpu1 - cpu0) / Math.max(1, run.requests) : undefined,
      errors: run.connect + run.read + run.write + run.status + run.timeout,
      requests: run.requests,
      foreign: Math.max(0, (busy1 - busy0 - (own1 - own0)) / (t1 - t0)),
    },
    stage: before ? delta(before, await scrape(url), modelOf(mix)) : undefined,
  };
}

/** Waits (at most `timeoutMs`) until other processes use no more than --max-other-load. */
async function waitForQuiet(timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (await otherLoad(1_000) <= MAX_OTHER_LOAD) return;
  }
}

/** Cores used by processes this benchmark did not start, over `ms`. */
async function otherLoad(ms: number): Promise<number> {
  const [busy0, own0, t0] = [await machineBusyMs(), await ownCpuMs(), performance.now()];
  await new Promise((resolve) => setTimeout(resolve, ms));
  const [busy1, own1, t1] = [await machineBusyMs(), await ownCpuMs(), performance.now()];
  return Math.max(0, (busy1 - busy0 - (own1 - own0)) / (t1 - t0));
}

function bodiesFile(mix: Mix): string {
  return `${tmp}/bodies/${mix.name}.jsonl`;
}

function modelOf(mix: Mix): string {
  return mix.sse ? "qwen3-sse" : "qwen3";
}

/** How a tidegate target differs from the default one. */
interface RouterVariant {
  workers?: number;
  server?: "deno";
  /** `kv.masterEvents.endpoint`: the silent publisher. */
  masterEvents?: string;
}

function routerConfig(port: number, stub: StubPorts, variant: RouterVariant) {
  const { workers, server, masterEvents } = variant;
  const model = (name: string, enginePorts: number[]) => ({
    name,
    tokenizer: { path: "builtin:qwen3" },
    kv: {
      store: "mooncake",
      url: `http://127.0.0.1:${stub.master}`,
      hash: "sha256_cbor",
      timeoutMs: KV_TIMEOUT_MS,
      ...(masterEvents ? { masterEvents: { endpoint: masterEvents } } : {}),
    },
    policy: "cache_aware",
    instances: Array.from({ length: INSTANCES }, (_, i) => ({
      id: `gpu-${i}`,
      url: `http://127.0.0.1:${enginePorts[i]}`,
      kvHost: `10.0.0.${i + 1}`,
    })),
  });
  return {
    listen: { host: "127.0.0.1", port, ...(server ? { server } : {}) },
    ...(workers === undefined ? {} : { workers }),
    models: [model("qwen3", stub.engine), model("qwen3-sse", stub.engineSse)],
  };
}

async function startRouter(
  name: string,
  stub: StubPorts,
  denoFlags: string[] = [],
  variant: RouterVariant = {},
): Promise<{ proc: Started; url: string }> {
  const port = freePort();
  const config = `${tmp}/${name}.json`;
  const text = JSON.stringify(routerConfig(port, stub, variant), null, 2);
  await Deno.writeTextFile(config, text);
  const proc = await launch(name, Deno.execPath(), [
    "run",
    "-A",
    ...denoFlags,
    "cli/main.ts",
    "start",
    "--config",
    config,
  ]);
  const url = `http://127.0.0.1:${port}`;
  await ready(`${url}/readyz`, proc, (s) => s === 200, 60_000);
  return { proc, url };
}

/** Waits until every model's mirror of the master's pool is exact (its /metrics says so). */
async function waitForExactMirrors(url: string, proc: Started): Promise<void> {
  const exact = async () => {
    const text = await (await fetch(`${url}/metrics`)).text();
    const states = text.split("\n").filter((line) => line.startsWith("tidegate_pool_mirror_exact"));
    return states.length === 2 && states.every((line) => line.trimEnd().endsWith(" 1"));
  };
  try {
    await eventually(exact, 30_000, "every model's pool mirror exact");
  } catch (error) {
    const log = await Deno.readTextFile(proc.log).catch(() => "");
    throw new Error(`the mirror never became exact (${error}); the router's log:\n${log}`);
  }
}

/** SMG over the same instances as tidegate, both models, once it lists every worker ready. */
async function startSmg(
  name: string,
  stub: StubPorts,
  policy: SmgPolicy,
): Promise<{ proc: Started; url: string }> {
  const port = freePort();
  const workers = [...stub.engine, ...stub.engineSse].map((p) => `http://127.0.0.1:${p}`);
  const args = smgLaunchArgs({ port, metricsPort: freePort(), workers, policy });
  const proc = await launch(name, SMG_PATH, args);
  const url = `http://127.0.0.1:${port}`;
  let exited = false;
  proc.child.status.then(() => exited = true);
  try {
    await waitForSmgWorkers(url, workers, 60_000, () => !exited);
  } catch (error) {
    const log = await Deno.readTextFile(proc.log).catch(() => "");
    throw new Error(`${(error as Error).message}; its log:\n${log.slice(-3000)}`);
  }
  return { proc, url };
}

async function stopStarted(proc: Started, graceMs?: number): Promise<number> {
  const at = started.indexOf(proc);
  if (at >= 0) started.splice(at, 1);
  return await stop(proc, graceMs);
}

async function launch(name: string, command: string, args: string[]): Promise<Started> {
  const proc = await start(name, command, args, { cwd: REPO, logDir: tmp });
  started.push(proc);
  return proc;
}

async function ready(
  url: string,
  proc: Started,
  ok?: (status: number) => boolean,
  timeoutMs = 20_000,
): Promise<void> {
  if (await waitFor(url, timeoutMs, ok)) return;
  const log = await Deno.readTextFile(proc.log).catch(() => "");
  throw new Error(`${proc.name} did not come up (${url}); its log:\n${log.slice(-3000)}`);
}

/**
 * Requests a target refused in its smoke test (`mix/target` → the answer): only SMG's, e.g. its
 * 400 for token-id prompts; their rows say so instead of figures.
 */
const refused = new Map<string, string>();

/** One request per target before measuring: what is wrong with its answer, if anything. */
async function smoke(mix: Mix, target: Target, base: string): Promise<string | undefined> {
  const body = mix.bodies[0].replaceAll(MARKER, "1");
  const response = await fetch(base + mix.path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  const text = await response.text();
  const problem = response.status !== 200
    ? `status ${response.status}: ${text.slice(0, 300)}`
    : mix.sse && !text.endsWith("data: [DONE]\n\n")
    ? `the stream does not end with [DONE]: ${text.slice(-200)}`
    : !mix.sse && !text.includes('"usage"')
    ? `not a completion: ${text.slice(0, 300)}`
    : target.startsWith("tidegate") &&
        !(Number(response.headers.get("x-tidegate-prompt-tokens")) > 0)
    ? "no x-tidegate-prompt-tokens header"
    : undefined;
  return problem;
}

let runs = 0;
/** The wrk run under way, stopped with everything else on Ctrl-C. */
let activeWrk: Deno.ChildProcess | undefined;

async function wrk(mix: Mix, url: string, seconds: number, connections: number) {
  runs++;
  const args = [
    `-t${Math.min(THREADS, connections)}`,
    `-c${connections}`,
    `-d${Math.max(1, Math.round(seconds))}s`,
    "--timeout",
    "30s",
    "-s",
    LUA,
    url,
    "--",
    mix.path,
    bodiesFile(mix),
    // A fresh range of request numbers per run: no prompt is ever sent twice.
    String(runs * 10_000_000),
    String(Math.min(THREADS, connections)),
  ];
  const child = new Deno.Command("wrk", { args, stdout: "piped", stderr: "piped" }).spawn();
  activeWrk = child;
  const out = await child.output().finally(() => activeWrk = undefined);
  const text = new TextDecoder().decode(out.stdout);
  const line = text.split("\n").find((l) => l.startsWith("WRKJSON "));
  if (!out.success || !line) {
    throw new Error(
      `wrk failed on ${mix.name} ${url}: ${text}\n${new TextDecoder().decode(out.stderr)}`,
    );
  }
  return JSON.parse(line.slice("WRKJSON ".length)) as WrkResult;
}

async function toolVersions(): Promise<string> {
  const run = async (command: string, args: string[]) => {
    const out = await new Deno.Command(command, { args, stdout: "piped", stderr: "piped" })
      .output();
    return new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  };
  const nginx = (await run("nginx", ["-v"])).match(/nginx\/(\S+)/)?.[1] ?? "?";
  const wrkVersion = (await run("wrk", ["--version"])).match(/wrk (\S+)/)?.[1] ?? "?";
  return `Deno ${Deno.version.deno}, nginx ${nginx}, wrk ${wrkVersion}`;
}

// ---------------------------------------------------------------------------------------------
// The router's own view of the runs: stage times and lookup outcomes from its /metrics.

type Samples = Map<string, number>;

async function scrape(base: string): Promise<Samples> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const samples: Samples = new Map();
  for (const line of text.split("\n")) {
    if (!line.startsWith("tidegate_")) continue;
    const space = line.lastIndexOf(" ");
    samples.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return samples;
}

function delta(before: Samples, after: Samples, model: string): StageDelta {
  const diff = (key: string) => (after.get(key) ?? 0) - (before.get(key) ?? 0);
  const labelOf = (key: string, label: string) => key.match(new RegExp(`${label}="([^"]*)"`))?.[1];
  const result: StageDelta = { stages: {}, lookups: {}, statuses: {}, tokenizerFailures: 0 };
  for (const key of after.keys()) {
    if (!key.includes(`model="${model}"`)) continue;
    const d = diff(key);
    if (key.startsWith("tidegate_stage_seconds_sum{")) {
      const stage = labelOf(key, "stage")!;
      const count = diff(key.replace("_sum{", "_count{"));
      if (count > 0) result.stages[stage] = 1000 * d / count;
    } else if (key.startsWith("tidegate_store_lookups_total{") && d > 0) {
      result.lookups[labelOf(key, "outcome")!] = d;
    } else if (key.startsWith("tidegate_requests_total{") && d > 0) {
      const status = `${labelOf(key, "status")} ${labelOf(key, "outcome")}`;
      result.statuses[status] = (result.statuses[status] ?? 0) + d;
    } else if (key.startsWith("tidegate_tokenizer_failures_total{")) {
      result.tokenizerFailures += d;
    }
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Tables.

const num = (value: number) =>
  value >= 1000
    ? Math.round(value).toLocaleString("en-US")
    : value >= 100
    ? value.toFixed(0)
    : value >= 10
    ? value.toFixed(1)
    : value.toFixed(2);
const times = (value: number, reference: number | undefined) =>
  reference === undefined || !(reference > 0) ? "—" : `${(value / reference).toFixed(2)}×`;
const tokensText = ([min, max]: [number, number]) =>
  min === max ? `${min}` : `${min.toLocaleString("en-US")}-${max.toLocaleString("en-US")}`;

/** The start of what the target answered its smoke test, on one table line. */
function refusal(mix: Mix, target: Target): string {
  return (refused.get(`${mix.name}/${target}`) ?? "?").replaceAll("|", "/").slice(0, 160);
}

function fullTable(mixes: Mix[], results: Map<string, Measured>): string {
  const lines = [
    "| mix | target | req/s | ×nginx | ×direct | p50 ms | ×nginx | ×direct | p99 ms | ×nginx | ×direct | CPU ms/req | ×nginx | other load |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const mix of mixes) {
    const nginx = results.get(`${mix.name}/nginx`)!;
    const direct = results.get(`${mix.name}/direct`)!;
    for (const target of TARGETS) {
      const r = results.get(`${mix.name}/${target}`);
      if (!r) {
        lines.push(`| ${mix.name} | ${target} | refused: ${refusal(mix, target)} |`);
        continue;
      }
      const flag = r.errors > 0 ? " !" : "";
      lines.push(
        `| ${mix.name} | ${target}${flag} | ${num(r.rps)} | ${times(r.rps, nginx.rps)} | ${
          times(r.rps, direct.rps)
        } | ${num(r.p50)} | ${times(r.p50, nginx.p50)} | ${times(r.p50, direct.p50)} | ${
          num(r.p99)
        } | ${times(r.p99, nginx.p99)} | ${times(r.p99, direct.p99)} | ${
          r.cpu === undefined ? "—" : r.cpu.toFixed(3)
        } | ${r.cpu === undefined ? "—" : times(r.cpu, nginx.cpu)} | ${r.foreign.toFixed(2)} |`,
      );
    }
  }
  return lines.join("\n");
}

/** One line per mix: tidegate against the peer router, SMG, with each of its two policies. */
function peerTable(mixes: Mix[], results: Map<string, Measured>): string {
  const lines = [
    "tidegate (cache_aware) beside SMG in the same run (ratios are tidegate ÷ SMG):",
    "",
    "| mix | tidegate req/s | SMG cache_aware req/s (×) | SMG round_robin req/s (×) | tidegate CPU ms/req | SMG cache_aware CPU ms/req (×) | SMG round_robin CPU ms/req (×) | p50 ms: tidegate / SMG ca / SMG rr | p99 ms: tidegate / SMG ca / SMG rr |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const mix of mixes) {
    const get = (target: Target) => results.get(`${mix.name}/${target}`)!;
    const [t, ca, rr] = [get("tidegate"), get("smg-cache_aware"), get("smg-round_robin")];
    if (!ca || !rr) {
      const why = refusal(mix, ca ? "smg-round_robin" : "smg-cache_aware");
      lines.push(`| ${mix.name} | ${num(t.rps)} | SMG refuses: ${why} |`);
      continue;
    }
    lines.push(
      `| ${mix.name} | ${num(t.rps)} | ${num(ca.rps)} (${times(t.rps, ca.rps)}) | ${num(rr.rps)} (${
        times(t.rps, rr.rps)
      }) | ${t.cpu!.toFixed(3)} | ${ca.cpu!.toFixed(3)} (${times(t.cpu!, ca.cpu)}) | ${
        rr.cpu!.toFixed(3)
      } (${times(t.cpu!, rr.cpu)}) | ${num(t.p50)} / ${num(ca.p50)} / ${num(rr.p50)} | ${
        num(t.p99)
      } / ${num(ca.p99)} / ${num(rr.p99)} |`,
    );
  }
  return lines.join("\n");
}

/** One line per mix: tidegate against nginx, direct and the Deno floor. */
function summaryTable(mixes: Mix[], results: Map<string, Measured>): string {
  const lines = [
    "| mix | tidegate req/s (×nginx, ×direct) | ×deno-bare | workers 0 req/s (pool gain) | Deno.serve req/s, CPU ms/req | master's events req/s (×deno-bare), CPU ms/req | p50 ms (×nginx) | p99 ms (×nginx) | CPU ms/req: tidegate / deno-bare / nginx | above the Deno floor |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const mix of mixes) {
    const get = (target: Target) => results.get(`${mix.name}/${target}`)!;
    const [t, n, d, b] = [get("tidegate"), get("nginx"), get("direct"), get("deno-bare")];
    const [w0, ds, mi] = [get("tidegate-w0"), get("tidegate-deno"), get("tidegate-mirror")];
    lines.push(
      `| ${mix.name} | ${num(t.rps)} (${times(t.rps, n.rps)}, ${times(t.rps, d.rps)}) | ${
        times(t.rps, b.rps)
      } | ${num(w0.rps)} (${times(t.rps, w0.rps)}) | ${num(ds.rps)}, ${ds.cpu!.toFixed(3)} | ${
        num(mi.rps)
      } (${times(mi.rps, b.rps)}), ${mi.cpu!.toFixed(3)} | ${num(t.p50)} (${
        times(t.p50, n.p50)
      }) | ${num(t.p99)} (${times(t.p99, n.p99)}) | ${t.cpu!.toFixed(3)} / ${b.cpu!.toFixed(3)} / ${
        n.cpu!.toFixed(3)
      } | +${(t.cpu! - b.cpu!).toFixed(3)} ms |`,
    );
  }
  return lines.join("\n");
}

function stageRow(
  mix: string,
  target: string,
  s: StageDelta,
  measured: Measured | undefined,
): string {
  const ms = (stage: string) => s.stages[stage] === undefined ? "—" : s.stages[stage].toFixed(3);
  const kv = (record: Record<string, number>) =>
    Object.entries(record).map(([k, v]) => `${k}: ${v}`).join(", ") || "none";
  return `| ${mix} | ${target} | ${ms("tokenize")} | ${ms("hash")} | ${ms("lookup")} | ${
    ms("schedule")
  } | ${kv(s.lookups)} | ${kv(s.statuses)} (wrk: ${measured?.requests}) | ${s.tokenizerFailures} |`;
}

function stageTable(
  mixes: Mix[],
  stages: Map<string, StageDelta>,
  results: Map<string, Measured>,
): string {
  const lines = [
    "tidegate's /metrics over each measured run (stage means are wall time, queueing included):",
    "",
    "| mix | target | tokenize ms | hash ms | lookup ms | schedule ms | store lookups | answers | tokenizer failures |",
    "|---|---|---:|---:|---:|---:|---|---|---:|",
  ];
  for (const mix of mixes) {
    for (const target of ["tidegate", "tidegate-w0", "tidegate-deno", "tidegate-mirror"]) {
      const s = stages.get(`${mix.name}/${target}`);
      if (s) lines.push(stageRow(mix.name, target, s, results.get(`${mix.name}/${target}`)));
    }
  }
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------
// The profile: the router alone under --cpu-prof on one mix.

async function profile(
  mix: Mix,
  dir: string,
  stub: StubPorts,
  unprofiled: Measured | undefined,
): Promise<string> {
  await Deno.mkdir(dir, { recursive: true });
  const absolute = await Deno.realPath(dir);
  const known = new Set<string>();
  for await (const entry of Deno.readDir(absolute)) known.add(entry.name);
  const mirrored = parsed["profile-mirror"];
  const { proc, url } = await startRouter(
    "tidegate-profiled",
    stub,
    ["--cpu-prof", "--cpu-prof-dir", absolute],
    mirrored ? { masterEvents: publisher!.endpoint } : {},
  );
  if (mirrored) await waitForExactMirrors(url, proc);
  await wrk(mix, url, 2, mix.connections ?? CONNECTIONS);
  await new Promise((resolve) => setTimeout(resolve, 500));
  await waitForQuiet(30_000);
  const cpu0 = await cpuMs(proc.pid);
  const [busy0, own0] = [await machineBusyMs(), await ownCpuMs()];
  const fromMs = performance.now() - proc.spawnedAt;
  const run = await wrk(mix, url, SECONDS, mix.connections ?? CONNECTIONS);
  const toMs = performance.now() - proc.spawnedAt;
  const [busy1, own1] = [await machineBusyMs(), await ownCpuMs()];
  const cpu1 = await cpuMs(proc.pid);
  const foreign = Math.max(0, (busy1 - busy0 - (own1 - own0)) / (toMs - fromMs));
  const code = await stopStarted(proc, 15_000);
  let file: string | undefined;
  for await (const entry of Deno.readDir(absolute)) {
    // The main thread's profile; each worker writes its own (`….worker-N.cpuprofile`).
    if (
      entry.name.endsWith(".cpuprofile") && !entry.name.includes(".worker-") &&
      !known.has(entry.name)
    ) file = entry.name;
  }
  if (!file) return `No .cpuprofile appeared in ${absolute} (the router exited with ${code}).`;
  const summary = summarizeProfile(
    JSON.parse(await Deno.readTextFile(`${absolute}/${file}`)),
    REPO,
    { fromMs, toMs },
  );
  const rps = run.requests / (run.duration_us / 1e6);
  return [
    `## Profile: ${mix.name} through ${
      mirrored ? "tidegate-mirror" : "tidegate"
    } under --cpu-prof (${absolute}/${file})`,
    "",
    `${num(rps)} req/s while profiled` +
    (unprofiled ? ` (${num(unprofiled.rps)} without the profiler)` : "") +
    `; process CPU ${((cpu1 - cpu0) / run.requests).toFixed(3)} ms/request (all threads), ` +
    `sampled JavaScript thread busy ${(summary.busyMs / run.requests).toFixed(3)} ms/request. ` +
    `Only the measured run's samples are counted (${(fromMs / 1000).toFixed(2)}-` +
    `${(toMs / 1000).toFixed(2)} s after the router was spawned: start-up and warm-up left out); ` +
    `other processes used ${foreign.toFixed(2)} cores meanwhile.`,
    "",
    formatSummary(summary, { top: 15, requests: run.requests }),
    "",
    "tidegate's own functions by total time (callees included; synchronous stacks only):",
    "",
    formatInclusive(summary, 15),
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------
// Last, once every declaration above is initialized.

try {
  Deno.exitCode = await main();
} catch (error) {
  // After Ctrl-C the runs under way fail as their processes stop: nothing more to say.
  if (!cleaning) console.error(`bench:overhead failed: ${(error as Error).stack ?? error}`);
  Deno.exitCode = 1;
} finally {
  await cleanup();
  Deno.removeSignalListener("SIGINT", onSignal);
  Deno.removeSignalListener("SIGTERM", onSignal);
}

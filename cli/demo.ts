import { parseCommandArgs, parsePortFlag } from "./args.ts";
import { resolveConfig } from "../src/config/load.ts";
import { policyProblems } from "../src/scheduling/named_policy.ts";
import { createRouter, type Router } from "../routes/app.ts";
import { type DemoCluster, startDemoCluster } from "../src/fakes/demo_cluster.ts";
import type { PdProtocol } from "../src/contracts.ts";
import { waitForShutdown } from "./start.ts";
import { resolveLogLevel } from "./log_level.ts";
import { didYouMean } from "../src/config/did_you_mean.ts";
import { POLICY_NAMES } from "../src/scheduling/registry.ts";
import { createJsonLog, type LogLevel } from "../src/telemetry/json_log.ts";

/** Where the router of a --write-config file listens: beside the demo's own on 8080. */
const WRITTEN_PORT = 8081;

const USAGE = `Usage: deno task demo [--host H] [--port N] [--engines N] [--policy NAME] [--exit]
                      [--pd [--protocol vllm-nixl|vllm-mooncake|sglang]]
                      [--log-level debug|info|warn|error]
                      [--write-config PATH] [--write-chat PATH]

Starts an embedded cluster (simulated vLLM engines + a Mooncake master), the router in front of
it, sends a burst of shared-prefix chat traffic, prints a summary, then keeps serving. With --pd
the cluster is disaggregated: 2 prefill + 2 decode engines speaking the protocol. The router's
JSON log goes to stderr from warn up; --log-level info adds the access log (a line per request).
The router listens on --host (default 127.0.0.1; 0.0.0.0 in a container).

--write-config PATH writes a router config file for this cluster (listening on 127.0.0.1:${WRITTEN_PORT},
admin token from TIDEGATE_ADMIN_TOKEN) for start, start --check and keys while the demo runs;
--write-chat PATH writes the chat the printed curl sends (also a keys --messages file). Both
files stay when the demo stops. --exit stops after the summary.`;

const WORDS = (
  "the a model cache token prefix engine store router request batch chunk layer kernel " +
  "memory latency budget queue replica segment transfer schedule decode prefill policy " +
  "cluster instance gateway region tenant session document manual chapter section table " +
  "value result figure measure report error retry health signal window deadline"
).split(" ");

/** A long, deterministic system prompt: the shared prefix of one "document" conversation. */
export function demoDocument(index: number, words = 2400): string {
  let seed = 0x9e3779b9 ^ (index * 0x85ebca6b);
  const next = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 2 ** 32;
  };
  const out: string[] = [
    `You are the support assistant for product ${index + 1}. Its manual follows.`,
  ];
  for (let i = 0; i < words; i++) {
    out.push(WORDS[Math.floor(next() * WORDS.length)] + (i % 17 === 16 ? "." : ""));
  }
  return out.join(" ");
}

export function demoChat(model: string, doc: number, question: string): Record<string, unknown> {
  return {
    model,
    stream: true,
    max_tokens: 8,
    messages: [
      { role: "system", content: demoDocument(doc) },
      { role: "user", content: question },
    ],
  };
}

export interface DemoResult {
  doc: number;
  /** The instance holding the document's KV: the prefill instance of a disaggregated request. */
  instance: string;
  /** A disaggregated request's decode instance. */
  decode?: string;
  promptTokens: number;
  hitTokens: number;
  ttftMs: number;
  status: number;
}

/** Sends one streaming chat and measures TTFT at the client (first SSE event). */
async function send(url: string, body: Record<string, unknown>, doc: number): Promise<DemoResult> {
  const started = performance.now();
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const reader = response.body!.getReader();
  let ttftMs = Number.NaN;
  for (;;) {
    const { done } = await reader.read();
    if (Number.isNaN(ttftMs)) ttftMs = performance.now() - started;
    if (done) break;
  }
  return {
    doc,
    instance: response.headers.get("x-tidegate-prefill-instance") ??
      response.headers.get("x-tidegate-instance") ?? "-",
    decode: response.headers.get("x-tidegate-decode-instance") ?? undefined,
    promptTokens: Number(response.headers.get("x-tidegate-prompt-tokens") ?? 0),
    hitTokens: Number(response.headers.get("x-tidegate-hit-tokens") ?? 0),
    ttftMs,
    status: response.status,
  };
}

/**
 * The burst: one cold request per document, all at once, then `perDoc` rounds of follow-ups (one
 * per document per round, concurrently). Cache-aware dispatch should send every follow-up to the
 * instance that prefilled its document.
 */
export async function runDemoBurst(
  url: string,
  model: string,
  docs = 4,
  perDoc = 5,
): Promise<DemoResult[]> {
  const results: DemoResult[] = [];
  results.push(
    ...await Promise.all(
      Array.from(
        { length: docs },
        (_, d) => send(url, demoChat(model, d, "Give me a one-line summary."), d),
      ),
    ),
  );
  for (let q = 0; q < perDoc; q++) {
    const question = `Question ${q + 1}: which section covers ${WORDS[q * 7 % WORDS.length]}?`;
    results.push(
      ...await Promise.all(
        Array.from({ length: docs }, (_, d) => send(url, demoChat(model, d, question), d)),
      ),
    );
  }
  return results;
}

export function summarize(results: DemoResult[], cluster: DemoCluster): string {
  const lines: string[] = [];
  const home = new Map<number, string>();
  for (const r of results) if (!home.has(r.doc)) home.set(r.doc, r.instance);
  const followUps = results.slice(home.size);
  const stayed = followUps.filter((r) => r.instance === home.get(r.doc)).length;
  lines.push(
    "| instance | requests | documents | prompt tokens | predicted hit tokens | mean TTFT (ms) |",
  );
  lines.push("|---|---:|---|---:|---:|---:|");
  for (const { id } of cluster.engines.filter((e) => e.role !== "decode")) {
    const mine = results.filter((r) => r.instance === id);
    const docs = [...new Set(mine.map((r) => r.doc))].sort().map((d) => `doc${d}`).join(" ") || "-";
    const mean = mine.length ? mine.reduce((s, r) => s + r.ttftMs, 0) / mine.length : 0;
    lines.push(
      `| ${id} | ${mine.length} | ${docs} | ${sum(mine, "promptTokens")} | ${
        sum(mine, "hitTokens")
      } | ${mine.length ? mean.toFixed(1) : "-"} |`,
    );
  }
  if (results.some((r) => r.decode)) lines.push("", ...pairsTable(results));
  const cold = results.slice(0, home.size);
  const meanOf = (rs: DemoResult[]) =>
    rs.reduce((s, r) => s + r.ttftMs, 0) / Math.max(1, rs.length);
  lines.push("");
  lines.push(
    `${results.length} requests (${results.filter((r) => r.status === 200).length} OK); ` +
      `${stayed}/${followUps.length} follow-ups landed on the instance holding their document; ` +
      `predicted hit ratio ${
        (sum(results, "hitTokens") / Math.max(1, sum(results, "promptTokens")) * 100).toFixed(1)
      }%; ` +
      `mean TTFT cold ${meanOf(cold).toFixed(1)} ms, follow-ups ${
        meanOf(followUps).toFixed(1)
      } ms.`,
  );
  return lines.join("\n");
}

/** Disaggregated requests per (prefill, decode) pair. */
function pairsTable(results: DemoResult[]): string[] {
  const pairs = new Map<string, DemoResult[]>();
  for (const r of results) {
    const key = `${r.instance} → ${r.decode ?? "-"}`;
    pairs.set(key, [...pairs.get(key) ?? [], r]);
  }
  return [
    "| pair (prefill → decode) | requests | predicted hit tokens |",
    "|---|---:|---:|",
    ...[...pairs].sort().map(([pair, rs]) =>
      `| ${pair} | ${rs.length} | ${sum(rs, "hitTokens")} |`
    ),
  ];
}

function sum(results: DemoResult[], field: "promptTokens" | "hitTokens"): number {
  return results.reduce((s, r) => s + r[field], 0);
}

async function serveOnPort(router: Router, hostname: string, port: number) {
  try {
    return await router.serve({ hostname, port });
  } catch (error) {
    if (!(error instanceof Deno.errors.AddrInUse)) throw error;
    console.log(`Port ${port} is busy; using a free port instead.`);
    return await router.serve({ hostname, port: 0 });
  }
}

interface DemoOptions {
  host: string;
  port: number;
  engines: number;
  policy: string;
  exit: boolean;
  /** Disaggregated: 2 prefill + 2 decode engines speaking this protocol. */
  pd?: PdProtocol;
  /** The router's log lines at this level and above go to stderr. */
  logLevel: LogLevel;
  /** Where to write a router config for this cluster (kept at exit). */
  writeConfig?: string;
  /** Where to write the try-it chat (kept at exit); a temp file otherwise. */
  writeChat?: string;
}

const PD_PROTOCOLS: readonly PdProtocol[] = ["vllm-nixl", "vllm-mooncake", "sglang"];

/** The demo's flags, every one checked before anything starts; a number is the exit code. */
function parseDemoArgs(args: string[]): DemoOptions | number {
  const parsed = parseCommandArgs(args, {
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string", default: "8080" },
    engines: { type: "string", default: "4" },
    policy: { type: "string", default: "affinity_ttft" },
    exit: { type: "boolean", default: false },
    pd: { type: "boolean", default: false },
    protocol: { type: "string", default: "vllm-nixl" },
    "log-level": { type: "string" },
    "write-config": { type: "string" },
    "write-chat": { type: "string" },
  }, USAGE);
  if (parsed.exit !== undefined) return parsed.exit;
  const { values } = parsed;
  const port = parsePortFlag(values.port);
  if (typeof port === "string") {
    console.error(port);
    return 2;
  }
  const engines = Number(values.engines);
  if (!(Number.isInteger(engines) && engines >= 1 && engines <= 16)) {
    console.error("--engines must be an integer in 1..16");
    return 2;
  }
  const [problem] = policyProblems({ models: [{ policy: values.policy }] });
  if (problem) {
    const hint = didYouMean(values.policy, POLICY_NAMES);
    console.error(`--policy: ${problem.replace(/^models\[0\]\.policy: /, "")}${hint}`);
    return 2;
  }
  // Quiet by default: the summary is the demo's screen; warnings and failures still show.
  const logLevel = resolveLogLevel(values["log-level"], "warn");
  if (typeof logLevel === "object") {
    console.error(logLevel.error);
    return 2;
  }
  const protocol = values.protocol as PdProtocol;
  if (!PD_PROTOCOLS.includes(protocol)) {
    console.error(`--protocol must be one of ${PD_PROTOCOLS.join(", ")}`);
    return 2;
  }
  return {
    host: values.host,
    port: port ?? 8080,
    engines,
    policy: values.policy,
    exit: values.exit,
    pd: values.pd ? protocol : undefined,
    logLevel,
    writeConfig: values["write-config"],
    writeChat: values["write-chat"],
  };
}

/** `demo`: the embedded cluster, a burst, a summary, then serve until Ctrl-C. */
export async function runDemo(args: string[]): Promise<number> {
  const options = parseDemoArgs(args);
  if (typeof options === "number") return options;
  console.log("Starting the embedded cluster (simulated vLLM engines + Mooncake master)...");
  const cluster = await startDemoCluster({
    engines: options.engines,
    pd: options.pd ? { protocol: options.pd, prefill: 2, decode: 2 } : undefined,
  });
  let router: Router | undefined;
  let tempChat: string | undefined;
  try {
    const config = resolveConfig(cluster.routerConfig({ policy: options.policy }));
    router = await createRouter(config, { log: createJsonLog(options.logLevel) });
    await router.warm();
    const address = await serveOnPort(router, options.host, options.port);
    const url = `http://${address.hostname}:${address.port}`;
    printCluster(cluster, options, url);
    if (options.writeConfig) await writeRouterConfig(options.writeConfig, cluster, options.policy);
    const results = await runDemoBurst(url, cluster.model);
    console.log(summarize(results, cluster));
    if (options.exit) {
      console.log("\n--exit: stopping the router and the cluster.");
      return 0;
    }
    const chatFile = options.writeChat ?? await Deno.makeTempFile({
      prefix: "tidegate-demo-",
      suffix: ".json",
    });
    if (!options.writeChat) tempChat = chatFile;
    await writeTryItChat(chatFile, cluster.model);
    console.log(tryIt(url, chatFile, results, options.writeConfig));
    await waitForShutdown();
    return 0;
  } finally {
    await router?.close();
    await cluster.close();
    if (tempChat) await Deno.remove(tempChat).catch(() => {});
  }
}

function printCluster(cluster: DemoCluster, options: DemoOptions, url: string): void {
  for (const e of cluster.engines) {
    console.log(`  ${e.id}: ${e.engine.url} (KV host ${e.kvHost}${e.role ? `, ${e.role}` : ""})`);
  }
  console.log(`  mooncake master: ${cluster.master.url}`);
  console.log(
    `Router (${options.policy}${
      options.pd ? `, disaggregated over ${options.pd}` : ""
    }) on ${url}. Sending a burst of shared-prefix chats...\n`,
  );
}

/**
 * The demo's router config as a file of its own, for `start`, `start --check` and `keys` while the
 * demo runs: a second router on WRITTEN_PORT in front of the same cluster, with the admin token
 * read from the environment as a production config would.
 */
export function writtenRouterConfig(
  cluster: DemoCluster,
  policy: string,
): Record<string, unknown> {
  return {
    ...cluster.routerConfig({ policy }),
    listen: { host: "127.0.0.1", port: WRITTEN_PORT },
    admin: { token: "env:TIDEGATE_ADMIN_TOKEN" },
  };
}

async function writeRouterConfig(path: string, cluster: DemoCluster, policy: string) {
  const config = writtenRouterConfig(cluster, policy);
  await Deno.writeTextFile(path, JSON.stringify(config, null, 2) + "\n");
  console.log(`Wrote ${path}: a router config for this cluster (listens on :${WRITTEN_PORT}).`);
}

/** The chat the printed curl sends: document 0's prefix and a new question, not streamed. */
async function writeTryItChat(path: string, model: string): Promise<void> {
  const chat = { ...demoChat(model, 0, "What does chapter 2 say?"), stream: false };
  await Deno.writeTextFile(path, JSON.stringify(chat));
}

/** What to try by hand while the demo serves. */
function tryIt(
  url: string,
  chatFile: string,
  results: DemoResult[],
  configFile: string | undefined,
): string {
  const pd = results.some((r) => r.decode);
  const holder = results.find((r) => r.doc === 0)?.instance ?? "?";
  const header = pd ? "x-tidegate-prefill-instance" : "x-tidegate-instance";
  const lines = [
    "",
    `Try it: this chat shares document 0's ~2.6k-token prefix, which ${holder} holds:`,
    "",
    `  curl -s -D - ${url}/v1/chat/completions -H 'content-type: application/json' -d @${chatFile}`,
    "",
    `The ${header} header should say ${holder}${
      pd ? " (x-tidegate-decode-instance names the decode side)" : ""
    }. Also: ${url}/metrics, ${url}/readyz, ${url}/dashboard.`,
  ];
  if (configFile) {
    lines.push(
      `Router config for this cluster: ${configFile} (deno task start --config ${configFile}, ` +
        `deno task keys --config ${configFile} ...).`,
    );
  }
  lines.push("Press Ctrl-C to stop.");
  return lines.join("\n");
}

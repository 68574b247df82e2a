/**
 * The SGLang Model Gateway (`smg`, a Rust router; the peer in tests/bench/overhead_bench.ts and
 * tests/real/policy_comparison_bench.ts), as tests/real/setup.sh installs it into `.venv`.
 *
 * What it does and does not do in these runs (checked against its `--help` and its answers):
 * workers are given by URL and registered in the background (it asks each for `/health`,
 * `/v1/models` and `/version`, then polls `/metrics` and its load endpoints); a request is routed
 * by the model it names. Over HTTP workers it does not tokenize: its cache-aware policy keeps a
 * radix tree of the request *text* per worker (its tokenizer registry serves only its gRPC path).
 * Its request log is turned down to `warn`, as tidegate logs no line per request either.
 */
import { eventually } from "./eventually.ts";

export const SMG_VERSION = "1.13.0";

const ROOT = new URL("../../", import.meta.url).pathname;
export const SMG_PATH = `${ROOT}.venv/bin/smg`;

export type SmgPolicy = "cache_aware" | "round_robin";

/** Why `smg` cannot run here (with the command that installs it), or undefined when it can. */
export async function smgMissing(): Promise<string | undefined> {
  const install = "`npx -y deno@2.9.6 task setup:real` (tests/real/setup.sh) installs it";
  try {
    const out = await new Deno.Command(SMG_PATH, { args: ["--version"], stdout: "piped" })
      .output();
    const version = new TextDecoder().decode(out.stdout).trim();
    if (version === `smg ${SMG_VERSION}`) return undefined;
    return `${SMG_PATH} is "${version}", not smg ${SMG_VERSION}: ${install}`;
  } catch {
    return `${SMG_PATH} is missing: ${install}`;
  }
}

/** `smg launch` arguments: loopback only, its Prometheus listener on a port of ours. */
export function smgLaunchArgs(options: {
  port: number;
  metricsPort: number;
  workers: string[];
  policy: SmgPolicy;
}): string[] {
  return [
    "launch",
    "--host",
    "127.0.0.1",
    "--port",
    String(options.port),
    // Its default metrics listener is 0.0.0.0:29000: a second router would fail to bind.
    "--prometheus-host",
    "127.0.0.1",
    "--prometheus-port",
    String(options.metricsPort),
    "--policy",
    options.policy,
    "--log-level",
    "warn",
    "--worker-urls",
    ...options.workers,
  ];
}

interface SmgWorker {
  url: string;
  model_id?: string;
  is_healthy?: boolean;
  status?: string;
}

/**
 * Waits until every worker URL is registered, healthy and ready (`GET /workers`); fails after
 * `timeoutMs` with what it lists, or at once when `alive()` turns false.
 */
export async function waitForSmgWorkers(
  base: string,
  workers: string[],
  timeoutMs: number,
  alive: () => boolean,
): Promise<void> {
  let listed: SmgWorker[] = [];
  await eventually(
    async () => {
      if (!alive()) throw new Error(`smg exited before its workers were ready`);
      try {
        const response = await fetch(`${base}/workers`, { signal: AbortSignal.timeout(2_000) });
        listed = response.ok ? (await response.json()).workers ?? [] : [];
      } catch {
        listed = [];
      }
      const ready = new Set(
        listed.filter((w) => w.is_healthy && w.status === "ready").map((w) => w.url),
      );
      return workers.every((url) => ready.has(url));
    },
    timeoutMs,
    () =>
      `smg at ${base} to list ${workers.length} ready workers (it lists ${
        JSON.stringify(listed.map((w) => [w.url, w.status, w.is_healthy]))
      })`,
  );
}

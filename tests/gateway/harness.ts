/**
 * A router on 127.0.0.1:0 in front of fake engines and a fake Mooncake master, for end-to-end
 * tests through real sockets. Prompts are token ids (tokenizer mode none) so tests control
 * exactly which chunk keys exist where.
 */
import type { TracerProvider } from "@opentelemetry/api";
import { resolveConfig } from "../../src/config/load.ts";
import { createRouter, type Router, type RouterOptions } from "../../routes/app.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import { type FakeEngine, type FakeEngineOptions, startFakeEngine } from "../fakes/fake_engine.ts";
import { type FakeMooncakeMaster, startFakeMooncakeMaster } from "../fakes/fake_mooncake_master.ts";

export const MODEL = "test-model";
export const CHUNK = 16;

export interface TestCluster {
  router: Router;
  url: string;
  engines: FakeEngine[];
  /** Engine i's KV host is `10.0.0.{i+1}`. */
  kvHost(i: number): string;
  master: FakeMooncakeMaster;
  /** Store keys (llumnix preset, sha256_cbor, chunk 16) of a token prompt. */
  keys(tokens: number[]): string[];
  /** Puts the first `chunks` keys of `tokens` on engine i's host. */
  hold(i: number, tokens: number[], chunks: number): void;
  logs: { message: string; fields?: Record<string, unknown> }[];
  close(): Promise<void>;
}

export interface TestClusterOptions {
  engines?: number;
  engine?: Partial<FakeEngineOptions>;
  /** Merged into the model's config. */
  model?: Record<string, unknown>;
  /** Merged into the model's `kv` section (which points at the fake master). */
  kv?: Record<string, unknown>;
  /** Merged into the top-level config. */
  top?: Record<string, unknown>;
  background?: boolean;
  tracerProvider?: TracerProvider;
}

export function range(from: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => from + i);
}

export async function startTestCluster(options: TestClusterOptions = {}): Promise<TestCluster> {
  const master = await startFakeMooncakeMaster();
  const engines: FakeEngine[] = [];
  for (let i = 0; i < (options.engines ?? 3); i++) {
    engines.push(
      await startFakeEngine({
        id: `e${i}`,
        model: MODEL,
        timeScale: 0.001,
        decodeSecondsPerToken: 0.001,
        ...options.engine,
      }),
    );
  }
  const kvHost = (i: number) => `10.0.0.${i + 1}`;
  const model = {
    name: MODEL,
    tokenizer: { mode: "none" },
    kv: {
      store: "mooncake",
      url: master.url,
      chunkSize: CHUNK,
      minPromptTokens: 0,
      timeoutMs: 50,
      ...options.kv,
    },
    policy: "cache_aware",
    health: { intervalMs: 60_000, timeoutMs: 500 },
    instances: engines.map((e, i) => ({ id: e.id, url: e.url, kvHost: kvHost(i) })),
    ...options.model,
  };
  const config = resolveConfig({ listen: { port: 0 }, models: [model], ...options.top });
  const logs: TestCluster["logs"] = [];
  const router = await createRouter(config, {
    background: options.background ?? false,
    tracerProvider: options.tracerProvider,
    log: (message, fields) => logs.push({ message, fields }),
  });
  const address = await router.serve({ port: 0 });
  const scheme = createKeyScheme({
    hash: "sha256_cbor",
    seed: "0",
    chunkSize: CHUNK,
    keyFormat: "llumnix",
  });
  return {
    router,
    url: `http://127.0.0.1:${address.port}`,
    engines,
    kvHost,
    master,
    keys: (tokens) => scheme.keys(tokens),
    hold(i, tokens, chunks) {
      for (const key of scheme.keys(tokens).slice(0, chunks)) master.put(key, `${kvHost(i)}:17000`);
    },
    logs,
    async close() {
      await router.close();
      await Promise.all([...engines.map((e) => e.close()), master.close()]);
    },
  };
}

/** A model with neither tokenizer nor KV store (dispatched on load alone), merged with `extra`. */
export function loadOnlyModel(
  name: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { name, tokenizer: { mode: "none" }, kv: { store: "none" }, ...extra };
}

/**
 * A router serving `models` on 127.0.0.1:0, background work on and logs dropped unless `options`
 * say otherwise. The caller closes it.
 */
export async function startRouter(
  models: Record<string, unknown>[],
  options: RouterOptions = {},
): Promise<{ router: Router; url: string }> {
  const config = resolveConfig({ listen: { port: 0 }, models });
  const router = await createRouter(config, { log: () => {}, ...options });
  const { port } = await router.serve({ port: 0 });
  return { router, url: `http://127.0.0.1:${port}` };
}

export function completion(
  url: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: MODEL, max_tokens: 4, ...body }),
  });
}

/** Polls until `check` holds (or fails the test after `timeoutMs`). */
export async function eventually(
  check: () => boolean,
  timeoutMs = 2_000,
  what = "condition",
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A router on 127.0.0.1:0 in front of fake engines and a fake Mooncake master, for end-to-end
 * tests through real sockets. Prompts are token ids (tokenizer mode none) so tests control
 * exactly which chunk keys exist where.
 */
import type { TracerProvider } from "@opentelemetry/api";
import { resolveConfig } from "../../src/config/load.ts";
import { createRouter, type Router, type RouterOptions } from "../../routes/app.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import {
  type FakeEngine,
  type FakeEngineOptions,
  startFakeEngine,
} from "../../src/fakes/fake_engine.ts";
import {
  type FakeMooncakeMaster,
  startFakeMooncakeMaster,
} from "../../src/fakes/fake_mooncake_master.ts";

export const MODEL = "test-model";
export const CHUNK = 16;

export interface TestCluster {
  router: Router;
  url: string;
  engines: FakeEngine[];
  /** Engine i's KV host is `10.0.0.{i+1}`. */
  kvHost(i: number): string;
  master: FakeMooncakeMaster;
  /** HA standbys of `master` (one store), listed after it in `kv.url`; none unless asked. */
  standbys: FakeMooncakeMaster[];
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
  /** Per engine, merged over `engine`: engine i, its KV host and the fake master. */
  engineOf?: (i: number, kvHost: string, master: FakeMooncakeMaster) => Partial<FakeEngineOptions>;
  /** Merged into the model's config. */
  model?: Record<string, unknown>;
  /** Merged into the model's `kv` section (which points at the fake master). */
  kv?: Record<string, unknown>;
  /** Merged into the top-level config. */
  top?: Record<string, unknown>;
  background?: boolean;
  tracerProvider?: TracerProvider;
  /** HA standbys sharing the master's store; `kv.url` then lists the master and them. */
  standbys?: number;
  /** The URL the router is given for engine i (default: the engine's own), e.g. a proxy's. */
  instanceUrl?: (engine: FakeEngine, i: number) => string;
  /** Merged into instance i's config (e.g. `{ engine: "sglang" }`). */
  instanceOf?: (i: number) => Record<string, unknown>;
}

export function range(from: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => from + i);
}

export async function startTestCluster(options: TestClusterOptions = {}): Promise<TestCluster> {
  const master = await startFakeMooncakeMaster();
  const standbys: FakeMooncakeMaster[] = [];
  for (let i = 0; i < (options.standbys ?? 0); i++) {
    standbys.push(await startFakeMooncakeMaster({ mode: "standby503", shareStoreWith: master }));
  }
  const engines: FakeEngine[] = [];
  const kvHost = (i: number) => `10.0.0.${i + 1}`;
  for (let i = 0; i < (options.engines ?? 3); i++) {
    engines.push(
      await startFakeEngine({
        id: `e${i}`,
        model: MODEL,
        timeScale: 0.001,
        decodeSecondsPerToken: 0.001,
        ...options.engine,
        ...options.engineOf?.(i, kvHost(i), master),
      }),
    );
  }
  const model = {
    name: MODEL,
    tokenizer: { mode: "none" },
    kv: {
      store: "mooncake",
      url: standbys.length === 0 ? master.url : [master.url, ...standbys.map((s) => s.url)],
      chunkSize: CHUNK,
      minPromptTokens: 0,
      // A deadline a busy machine cannot miss against the in-process fake master; the tests of
      // deadline behaviour set their own.
      timeoutMs: 1_000,
      ...options.kv,
    },
    policy: "cache_aware",
    health: { intervalMs: 60_000, timeoutMs: 500 },
    instances: engines.map((e, i) => ({
      id: e.id,
      url: options.instanceUrl?.(e, i) ?? e.url,
      kvHost: kvHost(i),
      ...options.instanceOf?.(i),
    })),
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
    standbys,
    keys: (tokens) => scheme.keys(tokens),
    hold(i, tokens, chunks) {
      for (const key of scheme.keys(tokens).slice(0, chunks)) master.put(key, `${kvHost(i)}:17000`);
    },
    logs,
    async close() {
      await router.close();
      await Promise.all([
        ...engines.map((e) => e.close()),
        ...standbys.map((s) => s.close()),
        master.close(),
      ]);
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
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: MODEL, max_tokens: 4, ...body }),
    signal,
  });
}

/** What the router sent to an instance, or a breaker change, or a test's own milestone. */
export type TimelineEvent =
  | { kind: "probe" | "load_poll" | "inference" | "other"; instance: string; path: string }
  | { kind: "breaker"; instance: string; from: string; to: string; reason: string }
  | { kind: "mark"; label: string };

/**
 * One ordered record of everything the router does to its instances (each fetch, by kind) and
 * of its breaker changes, with the test's milestones in between: assertions on the order of
 * events instead of on wall time, so they hold however slow the machine is.
 */
export interface Timeline {
  readonly events: TimelineEvent[];
  /** The router's `fetch` (RouterOptions): records, then fetches. */
  readonly fetch: typeof fetch;
  /** The router's `log` (RouterOptions): records breaker changes, then calls `next`. */
  readonly log: (message: string, fields?: Record<string, unknown>) => void;
  /** Records a milestone of the test; returns its position. */
  mark(label: string): number;
  /** Position of the first event after `from` that matches, or undefined. */
  find(match: (event: TimelineEvent) => boolean, from?: number): number | undefined;
  /** Events strictly after position `from` and before `to` (default: up to now). */
  between(from: number, to?: number): TimelineEvent[];
  /** How many requests of `kind` went to `instance` strictly between `from` and `to`. */
  count(kind: TimelineEvent["kind"], instance: string, from: number, to?: number): number;
}

const PATH_KINDS: Record<string, TimelineEvent["kind"]> = {
  "/health": "probe",
  "/health_generate": "probe",
  "/metrics": "load_poll",
  "/get_load": "load_poll",
  "/v1/completions": "inference",
  "/v1/chat/completions": "inference",
};

/** A Timeline for instances at `urls` (instance id → base URL). */
export function recordTimeline(
  urls: Record<string, string>,
  options: {
    fetch?: typeof fetch;
    next?: (message: string, fields?: Record<string, unknown>) => void;
  } = {},
): Timeline {
  const events: TimelineEvent[] = [];
  const byOrigin = new Map(Object.entries(urls).map(([id, url]) => [new URL(url).origin, id]));
  const inner = options.fetch ?? globalThis.fetch.bind(globalThis);
  const between = (from: number, to = events.length) => events.slice(from + 1, to);
  return {
    events,
    fetch: (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const instance = byOrigin.get(url.origin);
      if (instance !== undefined) {
        const kind = PATH_KINDS[url.pathname] ?? "other";
        events.push({ kind, instance, path: url.pathname } as TimelineEvent);
      }
      return inner(input, init);
    },
    log: (message, fields) => {
      if (message === "instance breaker changed" && fields) {
        events.push({
          kind: "breaker",
          instance: String(fields.instance),
          from: String(fields.from),
          to: String(fields.to),
          reason: String(fields.reason),
        });
      }
      options.next?.(message, fields);
    },
    mark(label) {
      events.push({ kind: "mark", label });
      return events.length - 1;
    },
    find(match, from = -1) {
      for (let i = from + 1; i < events.length; i++) if (match(events[i])) return i;
      return undefined;
    },
    between,
    count(kind, instance, from, to) {
      return between(from, to).filter((e) =>
        e.kind === kind && "instance" in e && e.instance === instance
      ).length;
    },
  };
}

/** Matches the breaker of `instance` changing to `state`. */
export function breakerTo(instance: string, state: string): (event: TimelineEvent) => boolean {
  return (event) => event.kind === "breaker" && event.instance === instance && event.to === state;
}

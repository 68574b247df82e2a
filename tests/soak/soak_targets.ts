/**
 * What a soak runs against.
 *
 *   demo:  the demo cluster and the router in this process, as `deno task demo` runs them (fake
 *          engines with a real tokenizer, prefix caches, a fake Mooncake master; chat prompts
 *          sharing long documents). The process measured is this one.
 *   fakes: fake engines and a fake Mooncake master in this process, the router in its own
 *          (`cli/main.ts start`); token-id prompts. The process measured is the router's.
 */
import { demoChat } from "../../cli/demo.ts";
import { createRouter, type Router } from "../../routes/app.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { startDemoCluster } from "../../src/fakes/demo_cluster.ts";
import { type FakeEngine, startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { startFakeMooncakeMaster } from "../../src/fakes/fake_mooncake_master.ts";
import { startRouterProcess } from "../support/router_process.ts";
import type { SoakRequestOf } from "./soak_traffic.ts";

export type SoakTargetName = "demo" | "fakes";

export interface SoakTarget {
  url: string;
  /** The process whose memory and descriptors are watched. */
  pid: number | "self";
  requestOf: SoakRequestOf;
  close(): Promise<void>;
}

export function startSoakTarget(name: SoakTargetName): Promise<SoakTarget> {
  return name === "demo" ? startDemoTarget() : startFakesTarget();
}

const DOCUMENTS = 6;

async function startDemoTarget(): Promise<SoakTarget> {
  const cluster = await startDemoCluster({ engines: 4 });
  let router: Router | undefined;
  try {
    router = await createRouter(resolveConfig(cluster.routerConfig()), { log: () => {} });
    const { port } = await router.serve({ port: 0 });
    return {
      url: `http://127.0.0.1:${port}`,
      pid: "self",
      requestOf: (n) => ({
        path: "/v1/chat/completions",
        body: demoChat(cluster.model, n % DOCUMENTS, `Question ${n}: what changed?`),
      }),
      async close() {
        await router?.close();
        await cluster.close();
      },
    };
  } catch (error) {
    await router?.close();
    await cluster.close();
    throw error;
  }
}

const FAKES_MODEL = "soak-model";
const FAKES_CHUNK = 16;

async function startFakesTarget(): Promise<SoakTarget> {
  const master = await startFakeMooncakeMaster();
  const engines: FakeEngine[] = [];
  for (let i = 0; i < 3; i++) {
    engines.push(startFakeEngine({
      id: `e${i}`,
      model: FAKES_MODEL,
      timeScale: 0.001,
      decodeSecondsPerToken: 0.001,
    }));
  }
  const dir = await Deno.makeTempDir({ prefix: "tidegate-soak-" });
  const config = `${dir}/tidegate.json`;
  await Deno.writeTextFile(config, JSON.stringify(fakesConfig(master.url, engines)));
  const closeFakes = async () => {
    await Promise.all([...engines.map((e) => e.close()), master.close()]);
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    const router = await startRouterProcess(config);
    return {
      url: router.url,
      pid: router.pid,
      requestOf: (n) => ({ path: "/v1/completions", body: tokenPrompt(n) }),
      async close() {
        await router.stop();
        await closeFakes();
      },
    };
  } catch (error) {
    await closeFakes();
    throw error;
  }
}

function fakesConfig(masterUrl: string, engines: FakeEngine[]): Record<string, unknown> {
  return {
    listen: { host: "127.0.0.1", port: 0 },
    shutdown: { readyDelayMs: 0, drainTimeoutMs: 2_000 },
    models: [{
      name: FAKES_MODEL,
      tokenizer: { mode: "none" },
      kv: { store: "mooncake", url: masterUrl, chunkSize: FAKES_CHUNK, minPromptTokens: 0 },
      policy: "cache_aware",
      instances: engines.map((e, i) => ({ id: e.id, url: e.url, kvHost: `10.0.0.${i + 1}` })),
    }],
  };
}

/** A token-id prompt: one of a few shared 128-token prefixes, then a tail of its own. */
function tokenPrompt(n: number): Record<string, unknown> {
  const doc = n % DOCUMENTS;
  const prefix = Array.from({ length: 128 }, (_, i) => doc * 10_000 + i);
  const tail = Array.from({ length: 24 }, (_, i) => 1_000_000 + ((n * 24 + i) % 50_000));
  return { model: FAKES_MODEL, prompt: [...prefix, ...tail], max_tokens: 4 };
}

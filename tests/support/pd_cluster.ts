/**
 * A disaggregated cluster over loopback for the P/D tests: the router in front of validating P/D
 * fakes (src/fakes/fake_engine.ts option `pd`), two prefill and two decode instances, and a fake
 * Mooncake master for the prefix lookup.
 */
import { resolveConfig } from "../../src/config/load.ts";
import { createRouter, type Router, type RouterOptions } from "../../routes/app.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import {
  type FakeEngine,
  type FakeEngineOptions,
  type FakePdOptions,
  startFakeEngine,
} from "../../src/fakes/fake_engine.ts";
import {
  type FakeMooncakeMaster,
  startFakeMooncakeMaster,
} from "../../src/fakes/fake_mooncake_master.ts";
import type { PdProtocol } from "../../src/fakes/pd_protocol.ts";
import { PdRegistry } from "../../src/fakes/pd_registry.ts";

export const MODEL = "pd-model";
export const CHUNK = 16;

export interface PdCluster {
  router: Router;
  url: string;
  prefill: FakeEngine[];
  decode: FakeEngine[];
  master: FakeMooncakeMaster;
  /** Puts the first `chunks` keys of `tokens` on prefill instance i's KV host. */
  hold(i: number, tokens: number[], chunks: number): void;
  close(): Promise<void>;
}

/** Options of the prefill or decode fakes beyond the cluster's own. */
export type FakeOverrides = Partial<
  Record<"prefill" | "decode", Omit<FakeEngineOptions, "pd"> & { pd?: Partial<FakePdOptions> }>
>;

export async function startPdCluster(
  protocol: PdProtocol,
  model: Record<string, unknown> = {},
  options: RouterOptions = {},
  fakes: FakeOverrides = {},
): Promise<PdCluster> {
  const registry = new PdRegistry();
  const master = await startFakeMooncakeMaster();
  const engine = (role: "prefill" | "decode", i: number) =>
    startFakeEngine({
      id: `${role[0]}${i}`,
      model: MODEL,
      flavour: protocol === "sglang" ? "sglang" : "vllm",
      timeScale: 0.001,
      decodeSecondsPerToken: 0.002,
      ...fakes[role],
      pd: { protocol, role, registry, timeoutMs: 2_000, ...fakes[role]?.pd },
    });
  const prefill = [engine("prefill", 0), engine("prefill", 1)];
  const decode = [engine("decode", 0), engine("decode", 1)];
  const instance = (e: FakeEngine, role: string, i: number) => ({
    id: e.id,
    url: e.url,
    role,
    kvHost: `10.0.${role === "prefill" ? 1 : 2}.${i + 1}`,
    engine: protocol === "sglang" ? "sglang" : "vllm",
    ...(e.pd?.bootstrapPort ? { bootstrapPort: e.pd.bootstrapPort } : {}),
  });
  const config = resolveConfig({
    listen: { port: 0 },
    models: [{
      name: MODEL,
      tokenizer: { mode: "none" },
      // A lookup deadline a busy machine cannot miss (the default 50 ms can: load-only, wrong P).
      kv: model.kv && (model.kv as { store?: string }).store === "none" ? model.kv : {
        store: "mooncake",
        url: master.url,
        chunkSize: CHUNK,
        minPromptTokens: 0,
        timeoutMs: 1_000,
        ...(model.kv as Record<string, unknown> | undefined),
      },
      policy: "kv_hit_len",
      health: { intervalMs: 60_000, timeoutMs: 1_000 },
      disaggregation: { protocol },
      instances: [
        ...prefill.map((e, i) => instance(e, "prefill", i)),
        ...decode.map((e, i) => instance(e, "decode", i)),
      ],
      ...withoutKv(model),
    }],
  });
  const router = await createRouter(config, { background: false, log: () => {}, ...options });
  const { port } = await router.serve({ port: 0 });
  const scheme = createKeyScheme({
    hash: "sha256_cbor",
    seed: "0",
    chunkSize: CHUNK,
    keyFormat: "llumnix",
  });
  return {
    router,
    url: `http://127.0.0.1:${port}`,
    prefill,
    decode,
    master,
    hold(i, tokens, chunks) {
      for (const key of scheme.keys(tokens).slice(0, chunks)) {
        master.put(key, `10.0.1.${i + 1}:17000`);
      }
    },
    async close() {
      await router.close();
      await Promise.all([...prefill, ...decode].map((e) => e.close()));
      await master.close();
    },
  };
}

/** The model's settings but its `kv`, which the cluster's own store settings take in. */
function withoutKv(model: Record<string, unknown>): Record<string, unknown> {
  const { kv: _kv, ...rest } = model;
  return rest;
}

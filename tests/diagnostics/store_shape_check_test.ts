import { assert, assertEquals, assertMatch } from "../assert.ts";
import { createRouter } from "../../routes/app.ts";
import { resolveConfig } from "../../src/config/load.ts";
import type { Config } from "../../src/config/schema.ts";
import { ModelRuntime } from "../../src/runtime/model_runtime.ts";
import { checkStoreShape } from "../../src/diagnostics/store_shape_check.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import {
  type FakeMooncakeMaster,
  startFakeMooncakeMaster,
} from "../../src/fakes/fake_mooncake_master.ts";
import { eventually } from "../support/eventually.ts";

type Logs = { message: string; fields?: Record<string, unknown> }[];

const MODEL = "Qwen/Qwen3-8B";
const TOKENS = Array.from({ length: 512 }, (_, i) => i + 1);

function config(masterUrl: string): Config {
  return resolveConfig({
    listen: { port: 0 },
    models: [{
      name: MODEL,
      tokenizer: { mode: "none" },
      kv: { store: "mooncake", url: masterUrl, chunkSize: 256, keyFormat: "llumnix" },
      instances: [{ id: "gpu-a", url: "http://127.0.0.1:9" }],
    }],
  });
}

function put(master: FakeMooncakeMaster, keyFormat: string, extra: Record<string, unknown> = {}) {
  const scheme = createKeyScheme({ hash: "sha256_cbor", chunkSize: 64, keyFormat, ...extra });
  for (const key of scheme.keys(TOKENS)) master.put(key, "10.0.0.1:17000");
}

async function runtimeFor(masterUrl: string, logs: Logs): Promise<ModelRuntime> {
  return await ModelRuntime.create(config(masterUrl).models[0], {
    fetch,
    now: () => performance.now(),
    random: Math.random,
    log: (message, fields) => logs.push({ message, fields }),
  });
}

Deno.test("at start, a store holding another layout than the configured one logs one warning", async () => {
  const master = await startFakeMooncakeMaster();
  put(master, "vllm-mooncake-store", { model: MODEL });
  const logs: Logs = [];
  const router = await createRouter(config(master.url), {
    background: false,
    storeShapeCheck: true,
    log: (message, fields) => logs.push({ message, fields }),
  });
  try {
    const warnings = () => logs.filter((l) => l.message.startsWith("warning: the KV store"));
    await eventually(() => warnings().length > 0, 5_000, "the shape warning");
    const [warning] = warnings();
    assertMatch(warning.message, /holds 8 vllm-mooncake-store key\(s\) but none of .*"llumnix"/);
    assertEquals(warning.fields?.model, MODEL);
    assertEquals(warning.fields?.storeHolds, { "vllm-mooncake-store": 8 });
    assertMatch(String(warning.fields?.run), /deno@2.9.6 task keys --detect --config .* --model/);
    assertEquals(warnings().length, 1);
  } finally {
    await router.close();
    await master.close();
  }
});

Deno.test("the shape check says nothing when the store holds the configured layout (or nothing)", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    const logs: Logs = [];
    const runtime = await runtimeFor(master.url, logs);
    logs.length = 0; // the seed line
    assertEquals(
      await checkStoreShape(runtime, { log: (m) => logs.push({ message: m }) }),
      "unknown",
    );
    put(master, "llumnix");
    put(master, "sglang-hicache", { hash: "sha256_hex" }); // a second layout beside it
    assertEquals(
      await checkStoreShape(runtime, { log: (m) => logs.push({ message: m }) }),
      "matches",
    );
    assertEquals(logs, []);
  } finally {
    await master.close();
  }
});

Deno.test("the shape check reads a bounded sample: a big store is cut, not downloaded", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    for (let i = 0; i < 5_000; i++) master.put(`${i.toString(16).padStart(64, "0")}@x`, "h:1");
    put(master, "vllm-mooncake-store", { model: MODEL });
    const logs: Logs = [];
    const runtime = await runtimeFor(master.url, logs);
    const verdict = await checkStoreShape(runtime, {
      log: (message, fields) => logs.push({ message, fields }),
      maxBytes: 4096,
    });
    assertEquals(verdict, "unknown", "the first 4 KiB hold no key of a known layout");
  } finally {
    await master.close();
  }
});

Deno.test("a master that accepts and never answers does not delay start-up, and close() cancels the check", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    try {
      for await (const conn of listener) held.push(conn); // read nothing, answer nothing
    } catch { /* closed */ }
  })();
  const url = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`;
  const logs: Logs = [];
  try {
    const started = performance.now();
    const router = await createRouter(config(url), {
      background: false,
      storeShapeCheck: { timeoutMs: 60_000 },
      log: (message, fields) => logs.push({ message, fields }),
    });
    const address = await router.serve({ port: 0 });
    const health = await fetch(`http://127.0.0.1:${address.port}/health`);
    await health.body?.cancel();
    const upMs = performance.now() - started;
    await eventually(() => held.length > 0, 5_000, "the check's connection");
    assert(upMs < 30_000, `start-up took ${Math.round(upMs)} ms`);
    const closing = performance.now();
    await router.close();
    assert(performance.now() - closing < 30_000, "close() waited for the hanging check");
    assertEquals(logs.filter((l) => l.message.startsWith("warning: the KV store")), []);
  } finally {
    listener.close();
    for (const conn of held) conn.close();
    await accepting;
  }
});

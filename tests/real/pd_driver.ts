/**
 * Runs inside a loopback-only network namespace (tests/real/vllm_pd_test.ts makes it): a real
 * vLLM prefill and decode pair joined by the MooncakeConnector, tidegate in front of them with
 * `disaggregation.protocol: vllm-mooncake`, and chats through it, streamed and not, each checked
 * against the prefill engine serving the same chat alone. Prints one JSON line of results.
 *
 * The connector binds its bootstrap server and transfer ports on every interface whatever it is
 * told; inside the namespace every interface is loopback.
 */
import { resolveConfig } from "../../src/config/load.ts";
import { createRouter } from "../../routes/app.ts";
import { readVllmMetrics } from "../../src/cluster/engine_load.ts";
import { REAL } from "./real_env.ts";
import { startVllm, type VllmEngine } from "./vllm_engine.ts";

const SHIM = new URL("./cpu_connector_shim", import.meta.url).pathname;
const BOOTSTRAP_PORT = 8998;

function connector(role: "kv_producer" | "kv_consumer", engineId: string) {
  return {
    kv_connector: "MooncakeConnector",
    kv_role: role,
    engine_id: engineId,
    kv_connector_extra_config: { mooncake_protocol: "tcp", num_workers: 2 },
  };
}

const ENV = { PYTHONPATH: SHIM, VLLM_HOST_IP: "127.0.0.1" };

function chat(doc: number): Record<string, unknown> {
  const system = Array.from({ length: 90 }, (_, i) => `Rule ${doc}.${i}: keep ${i % 7} apart.`)
    .join(" ");
  return {
    model: REAL.modelName,
    max_tokens: 8,
    temperature: 0,
    messages: [{ role: "system", content: system }, { role: "user", content: `Summarize ${doc}.` }],
  };
}

async function answer(url: string, body: Record<string, unknown>) {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const headers = Object.fromEntries(response.headers);
  const text = await response.text();
  if (body.stream) {
    const events = text.split("\n\n").filter((e) => e.startsWith("data: {"))
      .map((e) => JSON.parse(e.slice(6)));
    const content = events.map((e) => e.choices?.[0]?.delta?.content ?? "").join("");
    const usage = events.find((e) => e.usage)?.usage;
    // Why a stream came back empty, if it did: an error event, or how the engine finished.
    const error = events.find((e) => e.error)?.error?.message;
    const finish = events.map((e) => e.choices?.[0]?.finish_reason).find((f) => f);
    const done = text.includes("[DONE]");
    return { status: response.status, headers, content, usage, done, error, finish };
  }
  const json = JSON.parse(text);
  return {
    status: response.status,
    headers,
    content: json.choices?.[0]?.message?.content ?? json.error?.message,
    usage: json.usage,
    done: true,
  };
}

const engines: VllmEngine[] = [];
try {
  const [prefill, decode] = await Promise.all([
    startVllm({
      kvTransfer: connector("kv_producer", "prefill-engine"),
      env: ENV,
      startTimeoutMs: 900_000,
    }),
    startVllm({
      kvTransfer: connector("kv_consumer", "decode-engine"),
      env: ENV,
      startTimeoutMs: 900_000,
    }),
  ]);
  engines.push(prefill, decode);
  const router = await createRouter(
    resolveConfig({
      listen: { port: 0 },
      models: [{
        name: REAL.modelName,
        tokenizer: { path: REAL.model },
        kv: { store: "none" },
        disaggregation: { protocol: "vllm-mooncake" },
        instances: [
          { id: "p0", url: prefill.url, role: "prefill", bootstrapPort: BOOTSTRAP_PORT },
          { id: "d0", url: decode.url, role: "decode" },
        ],
      }],
    }),
    { log: () => {} },
  );
  await router.warm();
  const { port } = await router.serve({ port: 0 });
  const url = `http://127.0.0.1:${port}`;
  const results = [];
  for (let doc = 0; doc < 6; doc++) {
    const stream = doc % 2 === 1;
    const body = {
      ...chat(doc),
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
    };
    const started = performance.now();
    const routed = await answer(url, body);
    const ms = performance.now() - started;
    const alone = await answer(prefill.url, { ...chat(doc), stream: false });
    results.push({
      doc,
      stream,
      ms: Math.round(ms),
      status: routed.status,
      done: routed.done,
      prefill: routed.headers["x-tidegate-prefill-instance"],
      decode: routed.headers["x-tidegate-decode-instance"],
      promptTokens: routed.usage?.prompt_tokens,
      cachedTokens: routed.usage?.prompt_tokens_details?.cached_tokens,
      sameAsAlone: routed.content === alone.content,
      ...("finish" in routed ? { finish: routed.finish, error: routed.error } : {}),
      content: routed.content,
    });
  }
  await router.close();
  // P/D admission reads a decode batch's KV from the engine's page (its cache's size too).
  const page = await (await fetch(`${decode.url}/metrics`)).text();
  const decodeLoad = readVllmMetrics(page, { observedAtMs: 0, modelName: REAL.modelName });
  console.log(JSON.stringify({ ok: true, results, decodeLoad }));
} catch (error) {
  console.log(JSON.stringify({ ok: false, error: String((error as Error)?.stack ?? error) }));
} finally {
  await Promise.all(engines.map((e) => e.stop()));
}

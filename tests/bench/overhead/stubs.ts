/**
 * nginx configurations of tests/bench/overhead_bench.ts, njs-free, everything under one temp
 * prefix, 127.0.0.1 only, `daemon off`, one worker each (the router's JavaScript runs on one
 * thread too):
 *
 * - the stub instance: the engine (`POST /v1/completions`, `/v1/chat/completions` → a fixed
 *   OpenAI answer; `/health` 200; `/metrics` vLLM's load gauges; `/v1/models` and `/version` as
 *   vLLM answers them, which SMG asks before it registers a worker), the SSE engine (any POST →
 *   a static file of 256 `chat.completion.chunk` events, a usage event and `[DONE]`, as
 *   `text/event-stream`), and the Mooncake master (`GET /batch_query_keys` → a fixed answer).
 *   Each engine listens on INSTANCES ports, so a router in front sees as many distinct
 *   instances (SMG keys its workers by URL);
 * - the proxy instance: a plain reverse proxy in front of the two engines (keep-alive upstreams,
 *   HTTP/1.1, no response buffering, as one fronts a streaming LLM server).
 *
 * The master's fixed answer is valid for tidegate's client (src/kv/mooncake_response.ts): a
 * `{"success":true,"data":{...}}` map of v0.3.12+ entries. It lists 32 made-up keys, all
 * `OBJECT_NOT_FOUND`, so it costs what a real 32-key answer costs to parse; the keys asked for are
 * not among them, and a key missing from `data` reads as absent (mooncake_client.ts mergeAnswer
 * files nothing under it; prefix.ts counts it as a miss). Every lookup is thus an ok miss.
 */

/** Instances per model a router is given: the engine stub listens on this many ports. */
export const INSTANCES = 4;

export interface StubPorts {
  /** The engine's ports (INSTANCES of them); the first is the one direct and nginx use. */
  engine: number[];
  engineSse: number[];
  master: number;
}

export interface ProxyPorts {
  proxy: number;
  proxySse: number;
}

const SSE_TOKENS = 256;

function commonHead(prefix: string): string {
  return `daemon off;
worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path ${prefix}/client_body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  keepalive_requests 10000000;
  keepalive_timeout 120s;
  client_max_body_size 32m;
  client_body_buffer_size 1m;
`;
}

export const COMPLETION_BODY = JSON.stringify({
  id: "cmpl-bench",
  object: "text_completion",
  created: 1_700_000_000,
  model: "qwen3",
  choices: [{ index: 0, text: " ok", logprobs: null, finish_reason: "length" }],
  usage: { prompt_tokens: 8192, completion_tokens: 16, total_tokens: 8208 },
});

export const CHAT_BODY = JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion",
  created: 1_700_000_000,
  model: "qwen3",
  choices: [{
    index: 0,
    message: { role: "assistant", content: "ok" },
    logprobs: null,
    finish_reason: "length",
  }],
  usage: { prompt_tokens: 8192, completion_tokens: 16, total_tokens: 8208 },
});

/** 256 one-token chunks, a finish chunk, a usage chunk and `[DONE]`, as vLLM streams them. */
export function sseBody(): string {
  const chunk = (delta: Record<string, unknown>, finish: string | null) =>
    `data: ${
      JSON.stringify({
        id: "chatcmpl-bench",
        object: "chat.completion.chunk",
        created: 1_700_000_000,
        model: "qwen3",
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      })
    }\n\n`;
  let body = chunk({ role: "assistant", content: "" }, null);
  for (let i = 0; i < SSE_TOKENS; i++) body += chunk({ content: ` t${i}` }, null);
  body += chunk({}, "length");
  body += `data: ${
    JSON.stringify({
      id: "chatcmpl-bench",
      object: "chat.completion.chunk",
      created: 1_700_000_000,
      model: "qwen3",
      choices: [],
      usage: { prompt_tokens: 80, completion_tokens: SSE_TOKENS, total_tokens: 80 + SSE_TOKENS },
    })
  }\n\n`;
  return body + "data: [DONE]\n\n";
}

/** vLLM's load gauges, unlabelled (kept for any served model name). */
export const VLLM_METRICS = [
  "# HELP vllm:num_requests_running Number of requests in model execution batches.",
  "# TYPE vllm:num_requests_running gauge",
  "vllm:num_requests_running 0.0",
  "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
  "# TYPE vllm:num_requests_waiting gauge",
  "vllm:num_requests_waiting 0.0",
  "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
  "# TYPE vllm:kv_cache_usage_perc gauge",
  "vllm:kv_cache_usage_perc 0.0",
  "",
].join("\n");

/** A v0.3.12+ `/batch_query_keys` answer: `keys` made-up keys, each OBJECT_NOT_FOUND. */
export function masterBody(keys = 32): string {
  const entries: string[] = [];
  for (let i = 0; i < keys; i++) {
    const key = `${i.toString(16).padStart(64, "f")}_0`;
    entries.push(
      `"${key}":{"ok":false,"error":"OBJECT_NOT_FOUND","values":null,"disk_values":null,` +
        `"local_disk_values":null,"nof_values":null}`,
    );
  }
  return `{"success":true,"data":{${entries.join(",")}}}`;
}

/** `GET /v1/models` of a vLLM serving `model`. */
export function modelsBody(model: string): string {
  return JSON.stringify({
    object: "list",
    data: [{
      id: model,
      object: "model",
      created: 1_700_000_000,
      owned_by: "vllm",
      root: model,
      parent: null,
      max_model_len: 40_960,
    }],
  });
}

/** Writes the stub's files into `prefix` and returns its nginx.conf text. */
export async function stubConfig(prefix: string, ports: StubPorts): Promise<string> {
  await Deno.writeTextFile(`${prefix}/sse.txt`, sseBody());
  await Deno.writeTextFile(`${prefix}/metrics.txt`, VLLM_METRICS);
  await Deno.writeTextFile(`${prefix}/batch_query_keys.json`, masterBody());
  for (const file of ["sse.txt", "metrics.txt", "batch_query_keys.json"]) {
    await Deno.chmod(`${prefix}/${file}`, 0o644);
  }
  const engineCommon = (model: string) => `
    location = /health { return 200; }
    location = /metrics { default_type text/plain; alias ${prefix}/metrics.txt; }
    location = /version { default_type application/json; return 200 '{"version":"0.32.0"}'; }
    location = /v1/models { default_type application/json; return 200 '${modelsBody(model)}'; }`;
  const listen = (ports: number[]) => ports.map((port) => `listen 127.0.0.1:${port};`).join(" ");
  return commonHead(prefix) + `
  server {
    ${listen(ports.engine)}${engineCommon("qwen3")}
    location = /v1/completions { default_type application/json; return 200 '${COMPLETION_BODY}'; }
    location = /v1/chat/completions { default_type application/json; return 200 '${CHAT_BODY}'; }
  }
  server {
    ${listen(ports.engineSse)}${engineCommon("qwen3-sse")}
    # nginx serves static files to GET only: the 405 a POST gets is turned into the file.
    location / { default_type text/event-stream; root ${prefix}; try_files /sse.txt =404;
                 error_page 405 =200 $uri; }
  }
  server {
    listen 127.0.0.1:${ports.master};
    location = /batch_query_keys { default_type application/json;
                                   alias ${prefix}/batch_query_keys.json; }
    # The mirror's snapshot: no keys, one per line.
    location = /get_all_keys { default_type text/plain; return 200 ''; }
  }
}
`;
}

export function proxyConfig(prefix: string, ports: ProxyPorts, stub: StubPorts): string {
  const location = (upstream: string) => `
    location / {
      proxy_pass http://${upstream};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }`;
  return commonHead(prefix) + `
  upstream engine { server 127.0.0.1:${stub.engine[0]}; keepalive 256; }
  upstream engine_sse { server 127.0.0.1:${stub.engineSse[0]}; keepalive 256; }
  server { listen 127.0.0.1:${ports.proxy};${location("engine")}
  }
  server { listen 127.0.0.1:${ports.proxySse};${location("engine_sse")}
  }
}
`;
}

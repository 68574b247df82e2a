/**
 * The production tracing path: the router runs as its own process with OTEL_DENO=true and Deno's
 * built-in exporter ships spans over OTLP/HTTP (JSON here) to a receiver written in this test.
 */
import { assert, assertEquals } from "../assert.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { eventually } from "../support/eventually.ts";

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  /** OTLP SpanKind: 2 server, 3 client. */
  kind?: number;
}

function startReceiver() {
  const spans: OtlpSpan[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      const body = await request.text();
      if (new URL(request.url).pathname === "/v1/traces") {
        const json = JSON.parse(body);
        for (const resource of json.resourceSpans ?? []) {
          for (const scope of resource.scopeSpans ?? []) spans.push(...scope.spans);
        }
      }
      return new Response("{}", { headers: { "content-type": "application/json" } });
    },
  );
  return {
    spans,
    url: `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}`,
    close: () => server.shutdown(),
  };
}

/** Reads the child's stderr until the "tidegate listening" line and returns its URL. */
async function listeningUrl(stderr: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stderr.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    for (const line of buffer.split("\n")) {
      if (line.includes('"tidegate listening"')) {
        reader.releaseLock();
        return JSON.parse(line).url;
      }
    }
  }
  throw new Error(`router did not start:\n${buffer}`);
}

/**
 * The router as its own process under OTEL_DENO=true, exporting to `receiverUrl`; background
 * probes and load polls every `intervalMs` (by default too rarely to add spans).
 */
async function startTracedRouter(
  receiverUrl: string,
  engineUrl: string,
  dir: string,
  intervalMs = 60_000,
) {
  const config = `${dir}/router.json`;
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      models: [{
        name: "m",
        tokenizer: { mode: "none" },
        kv: { store: "none" },
        health: { intervalMs },
        load: { pollIntervalMs: intervalMs },
        instances: [{ id: "e0", url: engineUrl }],
      }],
    }),
  );
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../../cli/main.ts", import.meta.url).pathname,
      "start",
      "--config",
      config,
      "--port",
      "0",
    ],
    env: {
      OTEL_DENO: "true",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl,
      OTEL_SERVICE_NAME: "tidegate-test",
      NO_COLOR: "1",
    },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  return { child, url: await listeningUrl(child.stderr) };
}

/**
 * A completion sent over a raw socket, so the header name goes out spelled exactly as given
 * (`Traceparent`, as Go's net/http and Python's urllib send it); returns the status line.
 */
async function rawCompletion(url: string, headerName: string, traceparent: string) {
  const { hostname, port } = new URL(url);
  const conn = await Deno.connect({ hostname, port: Number(port) });
  try {
    const body = JSON.stringify({ model: "m", prompt: [1, 2, 3], max_tokens: 2 });
    const head = [
      "POST /v1/completions HTTP/1.1",
      `Host: ${hostname}:${port}`,
      "Content-Type: application/json",
      `${headerName}: ${traceparent}`,
      `Content-Length: ${new TextEncoder().encode(body).byteLength}`,
      "Connection: close",
    ].join("\r\n");
    await conn.write(new TextEncoder().encode(`${head}\r\n\r\n${body}`));
    const text = await new Response(conn.readable).text();
    return text.split("\r\n")[0];
  } catch (error) {
    conn.close();
    throw error;
  }
}

for (const headerName of ["traceparent", "Traceparent", "TRACEPARENT"]) {
  Deno.test({
    name: `with OTEL_DENO=true a "${headerName}" header continues the client's trace to the engine`,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const receiver = startReceiver();
      const engine = await startFakeEngine({ id: "e0", model: "m", timeScale: 0.001 });
      const dir = await Deno.makeTempDir();
      const { child, url } = await startTracedRouter(receiver.url, engine.url, dir);
      try {
        const traceId = "5bf92f3577b34da6a3ce929d0e0e4737";
        const status = await rawCompletion(url, headerName, `00-${traceId}-10f067aa0ba902b7-01`);
        assertEquals(status, "HTTP/1.1 200 OK");
        const seen = engine.stats.requests.at(-1)!;
        assert(seen.traceparent?.startsWith(`00-${traceId}-`), `engine saw ${seen.traceparent}`);
        child.kill("SIGTERM");
        await child.status;
        const ours = () => receiver.spans.filter((s) => s.traceId === traceId);
        await eventually(
          () => ours().some((s) => s.name === "upstream e0"),
          10_000,
          () => `the "upstream e0" span (spans so far: ${ours().map((s) => s.name).join(", ")})`,
        );
        const server = ours().find((s) => s.name === "POST /v1/completions");
        assert(server, `spans of the client's trace: ${ours().map((s) => s.name).join(", ")}`);
        assertEquals(server.parentSpanId, "10f067aa0ba902b7");
      } finally {
        try {
          child.kill("SIGKILL");
        } catch { /* already exited */ }
        await child.status;
        await engine.close();
        await receiver.close();
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}

Deno.test({
  name: "with OTEL_DENO=true every background probe and load poll is a root span of its own trace",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const receiver = startReceiver();
    const engine = await startFakeEngine({ id: "e0", model: "m", timeScale: 0.001 });
    const dir = await Deno.makeTempDir();
    const { child, url } = await startTracedRouter(receiver.url, engine.url, dir, 100);
    try {
      // Background work started from inside a request (an admin probe) must not join it.
      const added = await fetch(`${url}/admin/instances`, {
        method: "POST",
        headers: { traceparent: "00-6bf92f3577b34da6a3ce929d0e0e4738-20f067aa0ba902b7-01" },
        body: JSON.stringify({ model: "m", instance: { id: "e1", url: engine.url } }),
      });
      assertEquals(added.status, 201);
      await added.body?.cancel();
      const probesBefore = engine.stats.healthChecks;
      await eventually(
        () => engine.stats.healthChecks >= probesBefore + 6,
        10_000,
        "six more health probes",
      );
      child.kill("SIGTERM");
      await child.status;
      const background = () =>
        receiver.spans.filter((s) => s.kind === 3 && !s.name.startsWith("upstream"));
      await eventually(
        () => background().length >= 6,
        10_000,
        () => `six background spans (${background().length} so far)`,
      );
      const spans = background();
      assert(spans.length >= 6, `background client spans: ${spans.length}`);
      const parented = spans.filter((s) => s.parentSpanId);
      assertEquals(parented.length, 0, `probes under a parent: ${JSON.stringify(parented[0])}`);
      assertEquals(new Set(spans.map((s) => s.traceId)).size, spans.length, "one trace each");
    } finally {
      try {
        child.kill("SIGKILL");
      } catch { /* already exited */ }
      await child.status;
      await engine.close();
      await receiver.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "with OTEL_DENO=true the spans reach an OTLP receiver and the engine continues the same trace",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const receiver = startReceiver();
    const engine = await startFakeEngine({ id: "e0", model: "m", timeScale: 0.001 });
    const dir = await Deno.makeTempDir();
    const { child, url } = await startTracedRouter(receiver.url, engine.url, dir);
    try {
      const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
      const response = await fetch(`${url}/v1/completions`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
        },
        body: JSON.stringify({ model: "m", prompt: [1, 2, 3], max_tokens: 2 }),
      });
      assertEquals(response.status, 200);
      await response.text();
      const seen = engine.stats.requests.at(-1)!;
      assert(seen.traceparent?.startsWith(`00-${traceId}-`), `engine saw ${seen.traceparent}`);
      assert(!seen.traceparent!.includes(","), "exactly one traceparent reaches the engine");

      child.kill("SIGTERM");
      await child.status;
      const names = () => receiver.spans.filter((s) => s.traceId === traceId).map((s) => s.name);
      await eventually(
        () => names().includes("upstream e0"),
        10_000,
        () => `the "upstream e0" span (spans so far: ${names().join(", ")})`,
      );
      const ours = receiver.spans.filter((s) => s.traceId === traceId);
      const server = ours.find((s) => s.name === "POST /v1/completions");
      assert(server, `spans received: ${names().join(", ")}`);
      assertEquals(server.parentSpanId, "00f067aa0ba902b7");
      for (const name of ["tokenize", "hash", "schedule", "admission", "upstream e0"]) {
        const span = ours.find((s) => s.name === name);
        assert(span, `${name} missing from ${names().join(", ")}`);
        assertEquals(span.parentSpanId, server.spanId);
      }
      // The engine's traceparent names a span of this trace (Deno's fetch span under our attempt).
      const engineParent = seen.traceparent!.split("-")[2];
      const fetchSpan = ours.find((s) => s.spanId === engineParent);
      assert(fetchSpan, "the engine's parent span was exported");
    } finally {
      try {
        child.kill("SIGKILL");
      } catch { /* already exited */ }
      await child.status;
      await engine.close();
      await receiver.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

import { assert, assertEquals } from "../assert.ts";
import { type ForwardRequest, forwardWithRetries } from "../../src/proxy/forward.ts";
import { endToEndHeaders } from "../../src/proxy/hop_headers.ts";
import { observeBody } from "../../src/proxy/observed_body.ts";
import { eventually } from "../support/eventually.ts";

type Behaviour = "ok" | "refuse" | "hang" | 500 | 400;

function fakeFetch(behaviours: Record<string, Behaviour>, seen: string[]): typeof fetch {
  return ((input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input));
    seen.push(url.host);
    const behaviour = behaviours[url.host];
    if (behaviour === "refuse") return Promise.reject(new TypeError("connection refused"));
    if (behaviour === "hang") {
      return new Promise<Response>((_, reject) => {
        init?.signal?.addEventListener("abort", () => reject(init.signal!.reason));
      });
    }
    if (typeof behaviour === "number") {
      return Promise.resolve(new Response("{}", { status: behaviour }));
    }
    return Promise.resolve(new Response(`hello from ${url.host}`, { status: 200 }));
  }) as typeof fetch;
}

function request(targets: string[], extra: Partial<ForwardRequest> = {}): ForwardRequest {
  return {
    method: "POST",
    path: "/v1/completions",
    headers: new Headers(),
    body: new TextEncoder().encode("{}"),
    targets: targets.map((host) => ({ id: host, url: `http://${host}` })),
    maxAttempts: 3,
    headersTimeoutMs: 50,
    ...extra,
  };
}

const deps = (fetcher: typeof fetch) => ({ fetch: fetcher, now: () => performance.now() });

Deno.test("forwardWithRetries() retries a refused connection and a 5xx on the next-best target", async () => {
  const seen: string[] = [];
  const outcome = await forwardWithRetries(
    request(["a:1", "b:1", "c:1"]),
    deps(fakeFetch({ "a:1": "refuse", "b:1": 500, "c:1": "ok" }, seen)),
  );
  assertEquals(seen, ["a:1", "b:1", "c:1"]);
  assertEquals(outcome.kind, "response");
  if (outcome.kind !== "response") return;
  assertEquals(outcome.target.id, "c:1");
  assertEquals(await outcome.response.text(), "hello from c:1");
  assertEquals(outcome.attempts.map((a) => a.failure), ["connect_error", "http_5xx", undefined]);
});

Deno.test("forwardWithRetries() returns a 4xx as the engine's verdict without retrying", async () => {
  const seen: string[] = [];
  const outcome = await forwardWithRetries(
    request(["a:1", "b:1"]),
    deps(fakeFetch({ "a:1": 400, "b:1": "ok" }, seen)),
  );
  assertEquals(seen, ["a:1"]);
  assert(outcome.kind === "response" && outcome.response.status === 400);
});

Deno.test("forwardWithRetries() stops after the attempt budget and answers 502", async () => {
  const seen: string[] = [];
  const outcome = await forwardWithRetries(
    request(["a:1", "b:1", "c:1", "d:1"]),
    deps(fakeFetch({ "a:1": 500, "b:1": "refuse", "c:1": 500, "d:1": "ok" }, seen)),
  );
  assertEquals(seen.length, 3);
  assert(outcome.kind === "failed");
  assertEquals(outcome.status, 502);
});

Deno.test("forwardWithRetries() answers 504 when every attempt timed out before headers", async () => {
  const started = performance.now();
  const outcome = await forwardWithRetries(
    request(["a:1", "b:1"], { headersTimeoutMs: 30 }),
    deps(fakeFetch({ "a:1": "hang", "b:1": "hang" }, [])),
  );
  assert(outcome.kind === "failed");
  assertEquals(outcome.status, 504);
  assert(performance.now() - started < 1_000);
});

Deno.test("forwardWithRetries() skips targets the breaker refuses", async () => {
  const seen: string[] = [];
  const outcome = await forwardWithRetries(
    request(["a:1", "b:1"]),
    deps(fakeFetch({ "a:1": "ok", "b:1": "ok" }, seen)),
    { beforeAttempt: (target) => target.id !== "a:1" },
  );
  assertEquals(seen, ["b:1"]);
  assert(outcome.kind === "response" && outcome.target.id === "b:1");
});

Deno.test("forwardWithRetries() gives up quietly when the client leaves before headers", async () => {
  const controller = new AbortController();
  const seen: string[] = [];
  const forwarding = forwardWithRetries(
    request(["a:1", "b:1"], { headersTimeoutMs: 5_000, signal: controller.signal }),
    deps(fakeFetch({ "a:1": "hang", "b:1": "hang" }, seen)),
  );
  await eventually(() => seen.length === 1, 2_000, "the first attempt sent");
  controller.abort();
  const outcome = await forwarding;
  assertEquals(outcome.kind, "client_gone");
  assertEquals(outcome.attempts.length, 1);
});

Deno.test("endToEndHeaders() drops hop-by-hop headers and the ones Connection names", () => {
  const headers = endToEndHeaders(
    new Headers({
      connection: "keep-alive, x-private",
      "keep-alive": "timeout=5",
      "x-private": "1",
      "transfer-encoding": "chunked",
      host: "router",
      "content-length": "10",
      traceparent: "00-abc-def-01",
      authorization: "Bearer k",
    }),
  );
  assertEquals([...headers.keys()].sort(), ["authorization", "traceparent"]);
});

Deno.test("observeBody() reports the first byte and ends exactly once on completion", async () => {
  const events: string[] = [];
  const source = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(new Uint8Array([1]));
      c.enqueue(new Uint8Array([2]));
      c.close();
    },
  });
  const observed = observeBody(source, {
    onFirstByte: () => events.push("first"),
    onEnd: (outcome) => events.push(outcome),
  });
  const bytes = new Uint8Array(await new Response(observed).arrayBuffer());
  assertEquals([...bytes], [1, 2]);
  assertEquals(events, ["first", "completed"]);
});

Deno.test("observeBody() ends as client_aborted when the client cancels and cancels upstream", async () => {
  const events: string[] = [];
  let upstreamCancelled = false;
  const source = new ReadableStream<Uint8Array>({
    pull(c) {
      c.enqueue(new Uint8Array([1]));
    },
    cancel() {
      upstreamCancelled = true;
    },
  });
  const observed = observeBody(source, { onEnd: (outcome) => events.push(outcome) });
  const reader = observed.getReader();
  await reader.read();
  await reader.cancel("gone");
  assertEquals(events, ["client_aborted"]);
  assert(upstreamCancelled);
});

Deno.test("observeBody() appends an error event and ends once when the engine fails mid-stream", async () => {
  const events: string[] = [];
  let n = 0;
  const source = new ReadableStream<Uint8Array>({
    pull(c) {
      if (n++ === 0) c.enqueue(new TextEncoder().encode("data: {}\n\n"));
      else c.error(new Error("engine died"));
    },
  });
  const observed = observeBody(source, {
    onEnd: (outcome) => events.push(outcome),
    errorEvent: (error) => new TextEncoder().encode(`data: ${(error as Error).message}\n\n`),
  });
  const text = await new Response(observed).text();
  assertEquals(text, "data: {}\n\ndata: engine died\n\n");
  assertEquals(events, ["upstream_failed"]);
});

Deno.test("forwardWithRetries() keeps each engine's own 5xx message in the 502 (OpenAI, vLLM or text bodies)", async () => {
  const bodies: Record<string, BodyInit> = {
    a: JSON.stringify({ error: { message: "CUDA out of memory", type: "InternalServerError" } }),
    b: JSON.stringify({ object: "error", message: "EngineCore died" }),
    c: "upstream\nconnect error",
  };
  const fetcher = ((input: string | URL | Request) =>
    Promise.resolve(
      new Response(bodies[new URL(String(input)).host], { status: 500 }),
    )) as typeof fetch;
  const outcome = await forwardWithRetries(request(["a", "b", "c"]), deps(fetcher));
  assert(outcome.kind === "failed");
  assertEquals(outcome.status, 502);
  assertEquals(
    outcome.attempts.map((a) => a.error),
    [
      "HTTP 500: CUDA out of memory",
      "HTTP 500: EngineCore died",
      "HTTP 500: upstream connect error",
    ],
  );
  assert(outcome.message.includes("c: HTTP 500: upstream connect error"), outcome.message);
});

Deno.test("forwardWithRetries() does not wait on a 5xx body that never ends", async () => {
  const hanging = () =>
    Promise.resolve(
      new Response(new ReadableStream({ pull: () => new Promise(() => {}) }), { status: 503 }),
    );
  const started = performance.now();
  const outcome = await forwardWithRetries(request(["a"]), deps(hanging as typeof fetch));
  assert(outcome.kind === "failed");
  assertEquals(outcome.attempts[0].error, "HTTP 503");
  assert(performance.now() - started < 5_000, "bounded by the error body's read deadline");
});

/**
 * The request workers parse large bodies and hash long prompts exactly as the main loop would,
 * take jobs sent while they are still loading, and hand a body back when they cannot parse it.
 */
import { assert, assertEquals, assertRejects } from "../assert.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import { HttpError } from "../../src/openai/errors.ts";
import { InvalidRequestError, parseOpenAIRequest } from "../../src/openai/request.ts";
import { parseRequest } from "../../src/gateway/parse_request.ts";
import { RequestWorkerPool } from "../../src/gateway/request_worker_pool.ts";

const encode = (body: unknown) => new TextEncoder().encode(JSON.stringify(body));
const LIMITS = () => new Map([["m", 4_000_000]]);

Deno.test("request workers: a job sent while the worker loads is answered, not lost", async () => {
  const pool = new RequestWorkerPool({ size: 1, timeoutMs: 30_000 });
  try {
    // Sent at once: the worker's modules (WASM hashes) are still loading.
    const result = await pool.parse("completions", encode({ model: "m", prompt: "x" }), LIMITS());
    assertEquals(result.kind, "parsed");
  } finally {
    pool.close();
  }
});

Deno.test("request workers: a large body parses to what the main loop parses, token ids included", async () => {
  const pool = new RequestWorkerPool({ size: 1, timeoutMs: 30_000 });
  try {
    const ids = Array.from({ length: 300_000 }, (_, i) => (i * 7919) % 150_000);
    const bodies: [string, unknown][] = [
      ["completions", { model: "m", prompt: ids, max_tokens: 2 }],
      ["completions", { model: "m", prompt: [ids, ids.slice(0, 10)] }],
      ["completions", { model: "m", prompt: [ids] }],
      ["chat", {
        model: "m",
        messages: [{ role: "user", content: "w ".repeat(200_000) }],
        tools: [{ type: "function", function: { name: "f" } }],
      }],
    ];
    for (const [endpoint, body] of bodies) {
      const bytes = encode(body);
      const expected = parseOpenAIRequest(endpoint as "chat", bytes);
      const copy = bytes.slice();
      const { parsed, bytes: back } = await parseRequest(endpoint as "chat", copy, pool, LIMITS);
      assertEquals(parsed, expected);
      assertEquals(back, bytes, "the same body to forward");
    }
  } finally {
    pool.close();
  }
});

Deno.test("request workers: refusals keep their status, param, code and model", async () => {
  const pool = new RequestWorkerPool({ size: 1, timeoutMs: 30_000 });
  try {
    const invalid = encode({ model: "m", prompt: "x".repeat(300_000), max_tokens: -1 });
    const error = await assertRejects(
      () => parseRequest("completions", invalid, pool, LIMITS),
      InvalidRequestError,
    );
    assertEquals([error.status, error.options.param, (error as InvalidRequestError).model], [
      400,
      "max_tokens",
      "m",
    ]);
    const huge = encode({ model: "m", prompt: Array.from({ length: 1_100_000 }, () => 1) });
    const tooLarge = await assertRejects(
      () => parseRequest("completions", huge, pool, LIMITS),
      InvalidRequestError,
    );
    assertEquals([tooLarge.status, tooLarge.options.code], [413, "prompt_too_large"]);
  } finally {
    pool.close();
  }
});

Deno.test("request workers: long prompts hash to the main loop's block hashes and keys", async () => {
  const pool = new RequestWorkerPool({ size: 1, timeoutMs: 30_000 });
  try {
    const tokens = Array.from({ length: 70_000 }, (_, i) => (i * 31) % 151_000);
    for (const hash of ["sha256_cbor", "sha256", "xxhash", "xxh64_cumulative"] as const) {
      const options = { hash, seed: "0", chunkSize: 256, keyFormat: "llumnix" };
      const scheme = createKeyScheme(options);
      const extra = hash.startsWith("sha256") ? { cacheSalt: "salt" } : undefined;
      assertEquals(
        await pool.hash(scheme.options, tokens, extra),
        {
          blockHashes: scheme.blockHashes(tokens, extra),
          chunkKeys: scheme.chunkKeys(tokens, extra),
        },
        hash,
      );
    }
  } finally {
    pool.close();
  }
});

Deno.test("request workers: a body lost with a timed-out worker is a 503 to retry, never a wrong 400", async () => {
  const pool = new RequestWorkerPool({ size: 1, timeoutMs: 1 });
  try {
    await pool.ready();
    const bytes = encode({ model: "m", prompt: "y".repeat(5_000_000) });
    const error = await assertRejects(
      () => parseRequest("completions", bytes, pool, LIMITS),
      HttpError,
    );
    assertEquals([error.status, error.options.code], [503, "router_overloaded"]);
    assert(error.message.includes("send it again"), error.message);
    // One that never reached a worker (it was still loading) is parsed on the main loop.
    const fresh = new RequestWorkerPool({ size: 1, timeoutMs: 1 });
    const small = encode({ model: "m", prompt: "z".repeat(300_000) });
    assertEquals((await parseRequest("completions", small, fresh, LIMITS)).parsed.model, "m");
    fresh.close();
  } finally {
    pool.close();
  }
});

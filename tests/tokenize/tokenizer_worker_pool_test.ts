import { assert, assertEquals, assertRejects } from "../assert.ts";
import { eventually } from "../support/eventually.ts";
import { TokenizeInputError, TokenizeUnavailableError } from "../../src/tokenize/errors.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import {
  INLINE_MAX_CHARS,
  PooledAsyncTokenizer,
} from "../../src/tokenize/pooled_async_tokenizer.ts";
import { TokenizerWorkerPool } from "../../src/tokenize/tokenizer_worker_pool.ts";
import type { EncodeJob } from "../../src/tokenize/worker_protocol.ts";

const QWEN3 = { dir: "builtin:qwen3", fastPath: true, cacheMaxTokens: 100_000 };
const TEXT: EncodeJob = { kind: "text", text: "hello" };

function scripted(...names: string[]): () => Worker {
  let n = 0;
  return () =>
    new Worker(new URL("./fixtures/scripted_worker.ts", import.meta.url), {
      type: "module",
      name: names[Math.min(n++, names.length - 1)],
    });
}

/** Starts the pool's workers and waits until `ready` of them have loaded (no call in flight). */
async function started(pool: TokenizerWorkerPool, ready = pool.size || 1): Promise<void> {
  pool.start();
  await eventually(() => pool.readyWorkers >= ready, 60_000, "workers loaded");
}

Deno.test("worker pool: the same ids as the tokenizer on the main loop, for text and chat", async () => {
  const local = await loadTokenizer(QWEN3.dir, QWEN3);
  const pool = new TokenizerWorkerPool({ spec: QWEN3, size: 2, timeoutMs: 30_000 });
  try {
    const tokenizer = new PooledAsyncTokenizer(pool, local);
    assertEquals(pool.size, 0, "no worker before a long prompt needs one");
    const text = "The quick brown fox, 狐狸, jumps over 12,345 lazy dogs. ".repeat(80);
    assert(text.length > INLINE_MAX_CHARS);
    await started(pool, 2);
    assertEquals(await tokenizer.encode(text), local.encode(text));
    const messages = [
      { role: "system", content: "You are terse." },
      { role: "user", content: text },
    ];
    assertEquals(await tokenizer.encodeChat(messages), local.encodeChat(messages));
  } finally {
    pool.close();
  }
});

Deno.test("worker pool: a request the template refuses stays the request's fault across the boundary", async () => {
  const local = await loadTokenizer(QWEN3.dir, QWEN3);
  const pool = new TokenizerWorkerPool({ spec: QWEN3, size: 1, timeoutMs: 30_000 });
  try {
    await started(pool);
    const parts = [{ type: "text", text: "x".repeat(INLINE_MAX_CHARS) }, {
      type: "image_url",
      image_url: { url: "data:," },
    }];
    const tokenizer = new PooledAsyncTokenizer(pool, local);
    const error = await assertRejects(
      () =>
        tokenizer.encodeChat([{ role: "user", content: "look" }, { role: "user", content: parts }]),
      TokenizeInputError,
    );
    assertEquals(error.name, "ChatContentError");
  } finally {
    pool.close();
  }
});

Deno.test("worker pool: a worker that misses the deadline is replaced and the next call works", async () => {
  const pool = new TokenizerWorkerPool({
    spec: QWEN3,
    size: 1,
    timeoutMs: 50,
    createWorker: scripted("hang", "echo-7"),
  });
  try {
    await started(pool);
    await assertRejects(() => pool.encode(TEXT, 0), Error, "longer than 50 ms");
    assertEquals(pool.replacedWorkers, 1);
    await eventually(() => pool.readyWorkers === 1, 10_000, "replacement loaded");
    assertEquals(await pool.encode(TEXT, 0), [7]);
  } finally {
    pool.close();
  }
});

Deno.test("worker pool: a crashing worker fails its call fast, never the process, and is replaced", async () => {
  const local = await loadTokenizer(QWEN3.dir, QWEN3);
  const pool = new TokenizerWorkerPool({
    spec: QWEN3,
    size: 1,
    timeoutMs: 30_000,
    createWorker: scripted("crash", "echo-3"),
  });
  try {
    await started(pool);
    const tokenizer = new PooledAsyncTokenizer(pool, local);
    const error = await assertRejects(
      () => tokenizer.encode("y".repeat(INLINE_MAX_CHARS + 1)),
      TokenizeUnavailableError,
    );
    assert(error.message.includes("worker blew up"), error.message);
    assertEquals(pool.replacedWorkers, 1);
    await eventually(() => pool.readyWorkers === 1, 10_000, "replacement loaded");
    assertEquals(await pool.encode(TEXT, 0), [3]);
  } finally {
    pool.close();
  }
});

Deno.test("worker pool: a conversation keeps to one worker; a busier worker gives way", async () => {
  const pool = new TokenizerWorkerPool({
    spec: QWEN3,
    size: 2,
    timeoutMs: 30_000,
    createWorker: scripted("echo-0", "echo-1"),
  });
  try {
    await started(pool, 2);
    const turns = await Promise.all([0, 1, 2].map(() => pool.encode(TEXT, 5)));
    assertEquals(turns.map((ids) => ids[0]).sort(), [0, 1, 1], "two in flight: the third moves");
    for (let i = 0; i < 3; i++) assertEquals(await pool.encode(TEXT, 5), [1]);
    assertEquals(await pool.encode(TEXT, 4), [0]);
  } finally {
    pool.close();
  }
});

Deno.test("worker pool: a worker that cannot load is retired; long prompts then get no tokens, never the main loop", async () => {
  const local = await loadTokenizer(QWEN3.dir, QWEN3);
  const pool = new TokenizerWorkerPool({
    spec: QWEN3,
    size: 1,
    timeoutMs: 30_000,
    createWorker: scripted("unloadable"),
  });
  try {
    const tokenizer = new PooledAsyncTokenizer(pool, local);
    const text = "z ".repeat(INLINE_MAX_CHARS);
    const error = await assertRejects(() => tokenizer.encode(text), TokenizeUnavailableError);
    assertEquals((error as TokenizeUnavailableError).reason, "failed");
    assertEquals(pool.size, 1);
    await assertRejects(() => pool.encode(TEXT, 0), Error, "no tokenizer worker can take");
    assertEquals(await tokenizer.encode("short"), local.encode("short"), "short ones stay inline");
  } finally {
    pool.close();
  }
});

Deno.test("worker pool: a long prompt sent while the workers load waits for one, within its deadline", async () => {
  const local = await loadTokenizer(QWEN3.dir, QWEN3);
  const slow = new TokenizerWorkerPool({ spec: QWEN3, size: 1, timeoutMs: 60_000 });
  const never = new TokenizerWorkerPool({
    spec: QWEN3,
    size: 1,
    timeoutMs: 100,
    createWorker: scripted("silent"),
  });
  try {
    const text = "The early prompt waits for its worker. ".repeat(100);
    assert(text.length > INLINE_MAX_CHARS);
    // Sent before any worker has loaded: waits for the one loading, and gets the same ids.
    assertEquals(slow.readyWorkers, 0);
    assertEquals(await new PooledAsyncTokenizer(slow, local).encode(text), local.encode(text));
    // A worker that never loads: the call fails after its deadline (dispatched by load).
    const error = await assertRejects(
      () => new PooledAsyncTokenizer(never, local).encode(text),
      TokenizeUnavailableError,
    );
    assert(error.message.includes("no tokenizer worker was ready within 100 ms"), error.message);
  } finally {
    slow.close();
    never.close();
  }
});

Deno.test("worker pool: a chat whose tools are long goes to a worker even when its messages are short", async () => {
  const local = await loadTokenizer(QWEN3.dir, QWEN3);
  const pool = new TokenizerWorkerPool({
    spec: QWEN3,
    size: 1,
    timeoutMs: 30_000,
    createWorker: scripted("echo-9"),
  });
  try {
    await started(pool);
    const tokenizer = new PooledAsyncTokenizer(pool, local);
    const messages = [{ role: "user", content: "hi" }];
    const tool = { type: "function", function: { name: "f", description: "d".repeat(5_000) } };
    assertEquals(await tokenizer.encodeChat(messages, { tools: [tool] }), [9], "the worker's");
    const documents = [{ title: "t", text: "x".repeat(5_000) }];
    assertEquals(await tokenizer.encodeChat(messages, { documents }), [9]);
    const chatTemplateKwargs = { extra: "k".repeat(5_000) };
    assertEquals(await tokenizer.encodeChat(messages, { chatTemplateKwargs }), [9]);
    assertEquals(await tokenizer.encodeChat(messages), local.encodeChat(messages), "inline");
  } finally {
    pool.close();
  }
});

Deno.test("worker pool: close() fails the calls in flight and starts nothing more", async () => {
  const pool = new TokenizerWorkerPool({
    spec: QWEN3,
    size: 1,
    timeoutMs: 30_000,
    createWorker: scripted("hang"),
  });
  await started(pool);
  const inFlight = pool.encode(TEXT, 0);
  pool.close();
  await assertRejects(() => inFlight, Error, "closed");
  await assertRejects(() => pool.encode(TEXT, 0), Error, "no tokenizer worker can take");
  assertEquals(pool.size, 1, "nothing new started");
});

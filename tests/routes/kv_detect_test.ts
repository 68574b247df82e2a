import { assert, assertEquals, assertMatch } from "../assert.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import {
  completion,
  MODEL,
  range,
  startTestCluster,
  type TestCluster,
} from "../support/harness.ts";

const AUTH = { "content-type": "application/json", authorization: "Bearer s3cret" };

/** The engines wrote vLLM store keys (chunk 64); the router is configured for llumnix, chunk 16. */
const ENGINE_SCHEME = createKeyScheme({
  hash: "sha256_cbor",
  chunkSize: 64,
  keyFormat: "vllm-mooncake-store",
  model: MODEL,
});

function served(t: TestCluster, tokens: number[]): void {
  for (const key of ENGINE_SCHEME.keys(tokens)) t.master.put(key, `${t.kvHost(0)}:17000`);
}

function detect(t: TestCluster, body: unknown, headers: Record<string, string> = AUTH) {
  return fetch(`${t.url}/admin/kv/detect`, {
    method: "POST",
    headers,
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

Deno.test("POST /admin/kv/detect names the store's scheme for explicit tokens, behind the admin token", async () => {
  const t = await startTestCluster({ engines: 1, top: { admin: { token: "s3cret" } } });
  try {
    const tokens = range(100, 256);
    served(t, tokens);
    const denied = await detect(t, { model: MODEL, tokens }, {
      "content-type": "application/json",
    });
    assertEquals(denied.status, 401);
    assertEquals((await denied.json()).error.type, "authentication_error");

    const response = await detect(t, { model: MODEL, tokens });
    assertEquals(response.status, 200);
    const body = await response.json();
    assertEquals(body.prompts, [256]);
    const top = body.schemes[0];
    assertEquals(
      [top.keyFormat, top.hash, top.seed, top.chunkSize, top.presentChunks],
      ["vllm-mooncake-store", "sha256_cbor", "vllm-none-hash", 64, 4],
    );
    assertMatch(body.kvBlock, /^"kv": \{/);
    assert(body.candidates > 100 && body.survivors >= 1, JSON.stringify(body).slice(0, 300));
  } finally {
    await t.close();
  }
});

Deno.test("POST /admin/kv/detect {recent: n} uses the last prompts this router dispatched", async () => {
  const t = await startTestCluster({ engines: 1, top: { admin: { token: "s3cret" } } });
  try {
    const none = await detect(t, { model: MODEL, recent: 4 });
    assertEquals(none.status, 400);
    assertEquals((await none.json()).error.code, "no_recent_prompts");

    const first = range(1000, 128);
    const second = range(5000, 192);
    for (const prompt of [first, second]) {
      served(t, prompt);
      await (await completion(t.url, { prompt })).text();
    }
    const response = await detect(t, { model: MODEL, recent: 4 });
    assertEquals(response.status, 200);
    const body = await response.json();
    assertEquals(body.prompts, [192, 128], "newest first");
    assertEquals(body.schemes[0].keyFormat, "vllm-mooncake-store");
    assertEquals(body.schemes[0].presentChunks, 3 + 2, "summed over both prompts");
  } finally {
    await t.close();
  }
});

Deno.test("POST /admin/kv/detect answers bad requests in OpenAI's error shape", async () => {
  const t = await startTestCluster({ engines: 1, top: { admin: { token: "s3cret" } } });
  try {
    const cases: [unknown, number, string, string | null][] = [
      ["{not json", 400, "invalid_json", null],
      [{ tokens: [1, 2] }, 400, "invalid_value", "model"],
      [{ model: "nope", tokens: [1] }, 404, "model_not_found", "model"],
      [{ model: MODEL }, 400, "invalid_value", "tokens"],
      [{ model: MODEL, tokens: [1], recent: 2 }, 400, "invalid_value", "recent"],
      [{ model: MODEL, tokens: [1, -2] }, 400, "invalid_value", "tokens"],
      [{ model: MODEL, recent: 99 }, 400, "invalid_value", "recent"],
    ];
    for (const [body, status, code, param] of cases) {
      const response = await detect(t, body);
      assertEquals(response.status, status, JSON.stringify(body));
      const { error } = await response.json();
      assertEquals([error.code, error.param], [code, param], JSON.stringify(body));
      assertEquals(typeof error.message, "string");
      assertEquals(
        error.type,
        status === 404 || status === 400 ? "invalid_request_error" : error.type,
      );
    }
    await t.master.setMode("down");
    const down = await detect(t, { model: MODEL, tokens: range(1, 64) });
    assertEquals(down.status, 502);
    assertEquals((await down.json()).error.code, "kv_store_unreachable");
  } finally {
    await t.close();
  }
});

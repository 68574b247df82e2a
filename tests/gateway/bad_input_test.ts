import { assert, assertEquals } from "../assert.ts";
import { seededRandom } from "../../src/sim/rng.ts";
import { MODEL, startTestCluster } from "../support/harness.ts";

function randomValue(random: () => number, depth = 0): unknown {
  const kind = Math.floor(random() * (depth > 3 ? 6 : 8));
  switch (kind) {
    case 0:
      return null;
    case 1:
      return random() < 0.5;
    case 2:
      return [0, -1, 1e308, -0.5, 2 ** 53, 151643, NaN][Math.floor(random() * 7)];
    case 3:
      return ["", "x", "\u0000", "<|im_start|>", "\ud800", "🚀".repeat(50), "a".repeat(3000)][
        Math.floor(random() * 7)
      ];
    case 4:
      return Array.from({ length: Math.floor(random() * 4) }, () => Math.floor(random() * 200_000));
    case 5:
      return {
        role: random() < 0.5 ? "user" : 7,
        content: random() < 0.5 ? "hi" : [{ type: "text" }],
      };
    case 6:
      return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(random, depth + 1));
    default: {
      const out: Record<string, unknown> = {};
      for (
        const key of [
          "model",
          "prompt",
          "messages",
          "stream",
          "max_tokens",
          "tools",
          "chat_template_kwargs",
          "cache_salt",
          "n",
        ]
      ) {
        if (random() < 0.5) out[key] = randomValue(random, depth + 1);
      }
      if (random() < 0.6) out.model = MODEL;
      return out;
    }
  }
}

Deno.test("hundreds of malformed requests get answers in OpenAI's shape and never take the router down", async () => {
  // Engines answer with two tokens whatever max_tokens says (a random 2^53 would never end).
  const t = await startTestCluster({
    engine: { decodeSecondsPerToken: 0.0005, completionTokens: () => 2 },
  });
  try {
    const random = seededRandom(2026);
    const statuses = new Map<number, number>();
    for (let i = 0; i < 300; i++) {
      const path = random() < 0.5 ? "/v1/completions" : "/v1/chat/completions";
      let raw: Uint8Array<ArrayBuffer>;
      const roll = random();
      if (roll < 0.15) {
        raw = new Uint8Array(
          Array.from({ length: Math.floor(random() * 64) }, () => Math.floor(random() * 256)),
        );
      } else if (roll < 0.5) {
        raw = new TextEncoder().encode(JSON.stringify(randomValue(random)) ?? "undefined");
      } else {
        // A valid request with one or two fields replaced by anything.
        const body: Record<string, unknown> = path === "/v1/completions"
          ? { model: MODEL, prompt: random() < 0.5 ? "hello there" : [1, 2, 3], max_tokens: 2 }
          : { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 2 };
        const fields = [
          "prompt",
          "messages",
          "stream",
          "max_tokens",
          "tools",
          "chat_template_kwargs",
          "cache_salt",
          "user",
          "n",
          "extra",
        ];
        for (let f = 0; f < 1 + Math.floor(random() * 2); f++) {
          if (random() < 0.3) continue; // sometimes leave it valid
          body[fields[Math.floor(random() * fields.length)]] = randomValue(random);
        }
        raw = new TextEncoder().encode(JSON.stringify(body));
      }
      const response = await fetch(`${t.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: raw,
      });
      const text = await response.text();
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      assert(response.status < 500, `#${i} ${response.status}: ${text.slice(0, 200)}`);
      if (response.status >= 400) {
        const error = JSON.parse(text).error;
        assertEquals(typeof error.message, "string", `#${i}`);
        assert("type" in error && "param" in error && "code" in error, `#${i}: ${text}`);
      }
    }
    // The mix reached both the validator and the engines (whose own 4xx pass through).
    assert((statuses.get(400) ?? 0) > 50, JSON.stringify([...statuses]));
    assert((statuses.get(200) ?? 0) > 5, JSON.stringify([...statuses]));
    assertEquals((await fetch(`${t.url}/healthz`)).status, 200);
    const ok = await fetch(`${t.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, prompt: [1, 2, 3], max_tokens: 1 }),
    });
    assertEquals(ok.status, 200);
    await ok.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("a 5 MB model name or field name is not echoed back whole", async () => {
  const t = await startTestCluster({ engines: 1 });
  try {
    const huge = "m".repeat(5_000_000);
    const bodies = [
      { model: huge, prompt: "x" },
      { model: MODEL, prompt: "x", logit_bias: { [huge]: "not a number" } },
    ];
    for (const body of bodies) {
      const response = await fetch(`${t.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const text = await response.text();
      assert(response.status === 404 || response.status === 400, `${response.status}`);
      assert(text.length < 2_000, `an answer of ${text.length} characters`);
      assert(JSON.parse(text).error.message.match(/500\d{4} characters/), text);
    }
  } finally {
    await t.close();
  }
});

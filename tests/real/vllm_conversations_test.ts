/**
 * Anthropic's Messages API and OpenAI's Responses API through the router in front of two real
 * vLLM engines whose KV events are the router's only view of their caches: a conversation's
 * follow-up lands on the engine that served its opening, and the hit the router predicts is the
 * engine's own cached-token count; that holds only if the router renders a body into the very
 * prompt vLLM builds. A stored response's continuation lands on the engine that stored it.
 */
import { assert, assertEquals } from "../assert.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import { blockId } from "../../src/kv/events/engine_kv_event.ts";
import { anthropicToChat } from "../../src/openai/anthropic_messages.ts";
import { renderResponsesInput } from "../../src/openai/responses_request.ts";
import { loadTokenizer } from "../../src/tokenize/load_tokenizer.ts";
import { eventually } from "../support/eventually.ts";
import { eventsOnlyRouter } from "./events_only_router.ts";
import { REAL } from "./real_env.ts";
import { CPU_BLOCK_SIZE, kvEventEndpoints, startVllm } from "./vllm_engine.ts";

const scheme = createKeyScheme({ hash: "sha256", chunkSize: CPU_BLOCK_SIZE, keyFormat: "{hex}" });

/** Conversation n's opening: a long system prompt of its own, a tool, a question. */
function opening(n: number): Record<string, unknown> {
  return {
    model: REAL.modelName,
    max_tokens: 2,
    system: [{
      type: "text",
      text: `Case file ${n}. ` + `Clause ${n}: the tenant keeps the harbour gate shut at night. `
        .repeat(30),
    }],
    tools: [{
      name: "lookup",
      description: "Look up a clause",
      input_schema: { type: "object", properties: { clause: { type: "integer" } } },
    }],
    messages: [{ role: "user", content: `What does clause ${n} say?` }],
  };
}

function followUp(body: Record<string, unknown>): Record<string, unknown> {
  const messages = body.messages as Record<string, unknown>[];
  return {
    ...body,
    messages: [
      ...messages,
      {
        role: "assistant",
        content: [{ type: "tool_use", id: "tu_1", name: "lookup", input: { clause: 1 } }],
      },
      {
        role: "user",
        content: [{ type: "tool_result", tool_use_id: "tu_1", content: "Shut at night." }],
      },
    ],
  };
}

async function send(
  url: string,
  body: Record<string, unknown>,
  path = "/v1/messages",
): Promise<Response> {
  const response = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);
  return response;
}

/** A Responses conversation's opening: long instructions of its own and a question. */
function responsesOpening(n: number): Record<string, unknown> {
  return {
    model: REAL.modelName,
    max_output_tokens: 2,
    instructions: `Ledger ${n}. ` + `Entry ${n}: the harbour fee is paid at the gate. `.repeat(30),
    input: [{ role: "user", content: [{ type: "input_text", text: `What is entry ${n}?` }] }],
  };
}

Deno.test("real vLLM: Messages and Responses follow-ups land on the engine holding their prefix, predicted hit = the engine's cached tokens; a stored response's continuation on its engine", async () => {
  const ends = [await kvEventEndpoints(), await kvEventEndpoints()];
  const engines = await Promise.all(ends.map((e) =>
    startVllm({
      kvEventsEndpoint: e.pub,
      kvEventsReplayEndpoint: e.replay,
      startTimeoutMs: 600_000,
      env: { VLLM_ENABLE_RESPONSES_API_STORE: "1" },
    })
  ));
  const router = await eventsOnlyRouter(engines, ends);
  try {
    const { port } = await router.serve({ hostname: "127.0.0.1", port: 0 });
    const url = `http://127.0.0.1:${port}`;
    const caches = router.registry.runtime(REAL.modelName)!.engineCaches;
    const tokenizer = await loadTokenizer(REAL.model);
    const openings = [0, 1, 2, 3].map(opening);
    const blocksOf = (body: Record<string, unknown>) => {
      const { messages, tools } = anthropicToChat(body);
      return scheme.blockHashes(tokenizer.encodeChat(messages, { tools })).map(blockId);
    };
    // Each opening straight to one engine: only that engine's events can tell the router.
    for (const [n, body] of openings.entries()) {
      await (await send(engines[n % 2].url, body)).body?.cancel();
    }
    await eventually(
      () =>
        openings.every((body, n) => {
          const blocks = blocksOf(body);
          return caches.get(`v${n % 2}`)!.prefixBlocks(blocks) === blocks.length;
        }),
      30_000,
      "both mirrors to hold the openings",
    );
    for (const [n, body] of openings.entries()) {
      const response = await send(url, followUp(body));
      const answer = await response.json();
      assertEquals(response.headers.get("x-tidegate-instance"), `v${n % 2}`, `conversation ${n}`);
      const predicted = Number(response.headers.get("x-tidegate-hit-tokens"));
      assert(predicted >= 3 * CPU_BLOCK_SIZE, `conversation ${n}: predicted ${predicted}`);
      assertEquals(answer.usage.cache_read_input_tokens, predicted, `conversation ${n}`);
    }

    // Responses: the same, from instructions and input items.
    const ledgers = [0, 1].map(responsesOpening);
    const responseBlocks = (body: Record<string, unknown>) => {
      const { messages, tools } = renderResponsesInput(body)!;
      return scheme.blockHashes(tokenizer.encodeChat(messages, { tools })).map(blockId);
    };
    for (const [n, body] of ledgers.entries()) {
      await (await send(engines[n % 2].url, body, "/v1/responses")).body?.cancel();
    }
    await eventually(
      () =>
        ledgers.every((body, n) => {
          const blocks = responseBlocks(body);
          return caches.get(`v${n % 2}`)!.prefixBlocks(blocks) === blocks.length;
        }),
      30_000,
      "both mirrors to hold the ledgers",
    );
    for (const [n, body] of ledgers.entries()) {
      const input = [...body.input as unknown[], { role: "user", content: "And the fee?" }];
      const response = await send(url, { ...body, input }, "/v1/responses");
      const answer = await response.json();
      assertEquals(response.headers.get("x-tidegate-instance"), `v${n % 2}`, `ledger ${n}`);
      const predicted = Number(response.headers.get("x-tidegate-hit-tokens"));
      assert(predicted >= 3 * CPU_BLOCK_SIZE, `ledger ${n}: predicted ${predicted}`);
      assertEquals(answer.usage.input_tokens_details.cached_tokens, predicted, `ledger ${n}`);

      // Its continuation needs the history only that engine stored.
      for (let turn = 0; turn < 3; turn++) {
        const next = await send(url, {
          model: REAL.modelName,
          max_output_tokens: 2,
          previous_response_id: answer.id,
          input: `Turn ${turn}?`,
        }, "/v1/responses");
        await next.body?.cancel();
        assertEquals(next.headers.get("x-tidegate-instance"), `v${n % 2}`, `turn ${turn}`);
      }
      const stored = await fetch(`${url}/v1/responses/${answer.id}`);
      assertEquals(stored.status, 200);
      assertEquals((await stored.json()).id, answer.id);
    }
  } finally {
    await router.close();
    await Promise.all(engines.map((e) => e.stop()));
  }
});

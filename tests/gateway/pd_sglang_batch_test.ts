/**
 * SGLang P/D with requests the engine takes as a batch (a list of prompts, `n` > 1, /generate
 * batches): SGLang reads each item's bootstrap host, port and room at its index, so both legs
 * must carry lists with a distinct room per item, as sgl-router sends them. The fakes refuse a
 * batch with one room (src/fakes/pd_protocol.ts `checkSglangBatch`).
 */
import { assert, assertEquals } from "../assert.ts";
import { range } from "../support/harness.ts";
import { MODEL, type PdCluster, startPdCluster } from "../support/pd_cluster.ts";

async function post(t: PdCluster, path: string, body: Record<string, unknown>) {
  const response = await fetch(`${t.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  assertEquals(response.status, 200, text);
  return { response, text };
}

/** The bootstrap fields both legs of the last request received. */
function legs(t: PdCluster) {
  const last = (engines: PdCluster["prefill"]) =>
    engines.flatMap((e) => e.stats.requests).sort((a, b) => b.arrivedAtMs - a.arrivedAtMs)[0];
  return [last(t.prefill), last(t.decode)].map((r) => {
    assertEquals(r.pd?.outcome, "ok", r.pd?.error);
    return r.body!;
  });
}

function assertRooms(body: Record<string, unknown>, items: number, prefillPort: number) {
  const rooms = body.bootstrap_room as number[];
  assert(Array.isArray(rooms) && rooms.length === items, JSON.stringify(body.bootstrap_room));
  assertEquals(new Set(rooms).size, items, "a room per item");
  assertEquals(body.bootstrap_port, Array(items).fill(prefillPort));
  assertEquals((body.bootstrap_host as string[]).length, items);
}

Deno.test("sglang P/D: a completions batch, a chat with n > 1 and /generate batches carry a room per item", async () => {
  const t = await startPdCluster("sglang");
  try {
    const cases: [string, Record<string, unknown>, number][] = [
      ["/v1/completions", { model: MODEL, max_tokens: 2, prompt: [range(1, 40), range(1, 44)] }, 2],
      ["/v1/completions", { model: MODEL, max_tokens: 2, prompt: ["a b c"], n: 2 }, 2],
      [
        "/v1/chat/completions",
        { model: MODEL, max_tokens: 2, n: 3, messages: [{ role: "user", content: "hi" }] },
        3,
      ],
      ["/generate", { input_ids: [range(5, 40), range(5, 41)], sampling_params: { n: 2 } }, 4],
      ["/generate", { text: ["one", "two"], sampling_params: { max_new_tokens: 2 } }, 2],
    ];
    for (const [path, body, items] of cases) {
      const { response } = await post(t, path, body);
      const prefill = response.headers.get("x-tidegate-prefill-instance")!;
      const port = t.prefill.find((e) => e.id === prefill)!.pd!.bootstrapPort!;
      const [onPrefill, onDecode] = legs(t);
      assertRooms(onPrefill, items, port);
      assertRooms(onDecode, items, port);
      assertEquals(onPrefill.bootstrap_room, onDecode.bootstrap_room, "both legs meet per item");
    }
  } finally {
    await t.close();
  }
});

Deno.test("sglang P/D: a single /generate prompt takes one room, and streams through both legs", async () => {
  const t = await startPdCluster("sglang");
  try {
    const { response, text } = await post(t, "/generate", {
      input_ids: range(1, 64),
      sampling_params: { max_new_tokens: 3 },
      stream: true,
    });
    assert(response.headers.get("x-tidegate-decode-instance")?.startsWith("d"));
    assert(text.trimEnd().endsWith("data: [DONE]"), text);
    const [onPrefill, onDecode] = legs(t);
    assertEquals(typeof onPrefill.bootstrap_room, "number");
    assertEquals(onPrefill.bootstrap_room, onDecode.bootstrap_room);
  } finally {
    await t.close();
  }
});

/**
 * The flow-control queue's order: band first (lower priority value first), then fair between
 * tenants by weight over prompt tokens, then earliest deadline; its bounds; and the band a
 * request may ask for.
 */
import { assertEquals } from "../assert.ts";
import { type FlowEntry, FlowQueue } from "../../src/scheduling/flow_queue.ts";
import { priorityBand } from "../../src/scheduling/priority_band.ts";

const ROOMY = { maxRequests: 1_000, maxPromptTokens: 1_000_000 };

function entry(
  item: string,
  fields: Partial<Omit<FlowEntry<string>, "item">> = {},
): FlowEntry<string> {
  return {
    item,
    priority: 0,
    tenant: "",
    weight: 1,
    promptTokens: 100,
    deadline: 10_000,
    enqueuedAt: 0,
    ...fields,
  };
}

/** Serves the queue to the end, returning items in the order taken. */
function drain(queue: FlowQueue<string>): string[] {
  const order: string[] = [];
  for (let head = queue.peek(); head; head = queue.peek()) {
    queue.take(head);
    order.push(head.item);
  }
  return order;
}

Deno.test("a more urgent band goes first whatever arrived before it; inside a band, the earliest deadline", () => {
  const queue = new FlowQueue<string>(ROOMY);
  queue.push(entry("batch-late", { priority: 5, deadline: 900 }));
  queue.push(entry("batch-early", { priority: 5, deadline: 100 }));
  queue.push(entry("interactive", { priority: -1, deadline: 5_000 }));
  queue.push(entry("default", { priority: 0, deadline: 50 }));
  assertEquals(drain(queue), ["interactive", "default", "batch-early", "batch-late"]);
  assertEquals(queue.size, 0);
  assertEquals(queue.promptTokens, 0);
});

Deno.test("inside a band, tenants are served in proportion to their weights, not their arrival", () => {
  const queue = new FlowQueue<string>(ROOMY);
  // The heavy tenant queued 30 requests first; the light one 30 after, with double weight.
  for (let i = 0; i < 30; i++) queue.push(entry(`a${i}`, { tenant: "a", deadline: i }));
  for (let i = 0; i < 30; i++) {
    queue.push(entry(`b${i}`, { tenant: "b", weight: 2, deadline: 100 + i }));
  }
  const first30 = drain(queue).slice(0, 30);
  const bShare = first30.filter((item) => item.startsWith("b")).length;
  assertEquals(bShare, 20, `b (weight 2) gets two of every three turns: ${first30.join(" ")}`);
});

Deno.test("fairness counts prompt tokens: a tenant of long prompts gets fewer turns", () => {
  const queue = new FlowQueue<string>(ROOMY);
  for (let i = 0; i < 10; i++) {
    queue.push(entry(`long${i}`, { tenant: "long", promptTokens: 1_000 }));
  }
  for (let i = 0; i < 10; i++) {
    queue.push(entry(`short${i}`, { tenant: "short", promptTokens: 100 }));
  }
  const first11 = drain(queue).slice(0, 11);
  assertEquals(first11.filter((item) => item.startsWith("long")).length, 1, first11.join(" "));
});

Deno.test("a tenant back from idle banks no credit: it starts at the band's clock", () => {
  const queue = new FlowQueue<string>(ROOMY);
  for (let i = 0; i < 6; i++) queue.push(entry(`a${i}`, { tenant: "a" }));
  queue.push(entry("b0", { tenant: "b" }));
  // b's one request is served, then a is served alone a while.
  const beforeReturn = [0, 1, 2, 3, 4].map(() => {
    const head = queue.peek()!;
    queue.take(head);
    return head.item;
  });
  assertEquals(beforeReturn, ["a0", "b0", "a1", "a2", "a3"]);
  for (let i = 1; i < 6; i++) queue.push(entry(`b${i}`, { tenant: "b" }));
  // Credited for its idle time b would now take three turns in a row; it alternates instead.
  assertEquals(drain(queue).slice(0, 3), ["b1", "a4", "b2"]);
});

Deno.test("bounds: requests and prompt tokens; a removed entry frees its room and costs its tenant nothing", () => {
  const queue = new FlowQueue<string>({ maxRequests: 2, maxPromptTokens: 250 });
  const a = entry("a", { tenant: "x" });
  assertEquals(queue.push(a), { queued: true, displaced: [] });
  assertEquals(queue.push(entry("b", { promptTokens: 200 })), {
    queued: false,
    limit: "prompt_tokens",
  });
  assertEquals(queue.push(entry("c")), { queued: true, displaced: [] });
  assertEquals(queue.push(entry("d", { promptTokens: 1 })), { queued: false, limit: "requests" });
  assertEquals(queue.remove(a), true);
  assertEquals(queue.remove(a), false, "removed once");
  assertEquals(queue.push(entry("d", { promptTokens: 1 })), { queued: true, displaced: [] });
  assertEquals(queue.size, 2);
  assertEquals(queue.promptTokens, 101);
});

Deno.test("expiry: entries at or past their deadline, and the next deadline for the one timer", () => {
  const queue = new FlowQueue<string>(ROOMY);
  queue.push(entry("soon", { deadline: 100 }));
  queue.push(entry("later", { deadline: 300, priority: 3 }));
  queue.push(entry("now", { deadline: 50, tenant: "t" }));
  assertEquals(queue.nextDeadline(), 50);
  assertEquals(queue.expired(100).map((e) => e.item).sort(), ["now", "soon"]);
  assertEquals(queue.lengths(), new Map([[0, 2], [3, 1]]));
});

Deno.test("priority band: the client's ask within its tenant's bounds; without tenants, within the range", () => {
  assertEquals(priorityBand(undefined), 0);
  assertEquals(priorityBand(-3), -3);
  assertEquals(priorityBand(-50), -10, "the range bounds the metric label");
  assertEquals(priorityBand(2.6), 3);
  assertEquals(priorityBand(-5, { priority: 2 }), 2, "no more urgent than the tenant's own band");
  assertEquals(priorityBand(undefined, { priority: 2 }), 2);
  assertEquals(priorityBand(7, { priority: 2 }), 7, "anyone may ask to wait longer");
  assertEquals(priorityBand(-5, { priority: 2, minPriority: -3 }), -3);
});

Deno.test("peek passes over entries already tried, in the same order", () => {
  const queue = new FlowQueue<string>(ROOMY);
  const urgent = entry("urgent", { priority: -1 });
  const a = entry("a", { tenant: "a", deadline: 1 });
  const b = entry("b", { tenant: "b", deadline: 2 });
  const a2 = entry("a2", { tenant: "a", deadline: 3 });
  for (const e of [a, b, a2, urgent]) queue.push(e);
  const tried = new Set<FlowEntry<string>>();
  const order: string[] = [];
  for (let next = queue.peek(tried); next; next = queue.peek(tried)) {
    order.push(next.item);
    tried.add(next);
  }
  assertEquals(order, ["urgent", "a", "a2", "b"]);
  assertEquals(queue.size, 4, "peeking takes nothing");
});

Deno.test("full: a more urgent request pushes out the least urgent, latest deadline first; an equal or less urgent one is refused", () => {
  const queue = new FlowQueue<string>({ maxRequests: 3, maxPromptTokens: 1_000 });
  const batchEarly = entry("batch-early", { priority: 5, deadline: 100 });
  const batchLate = entry("batch-late", { priority: 5, deadline: 900 });
  const normal = entry("normal", { priority: 0 });
  for (const e of [batchEarly, batchLate, normal]) queue.push(e);
  assertEquals(queue.push(entry("another-batch", { priority: 5 })), {
    queued: false,
    limit: "requests",
  });
  const urgent = entry("urgent", { priority: -1 });
  assertEquals(queue.push(urgent), { queued: true, displaced: [batchLate] });
  assertEquals(queue.entries().map((e) => e.item).sort(), ["batch-early", "normal", "urgent"]);
  // Room for 800 tokens under the 1,000-token bound: one batch request out is enough.
  const big = entry("big", { priority: -2, promptTokens: 800 });
  assertEquals(queue.push(big), { queued: true, displaced: [batchEarly] });
  assertEquals(queue.entries().map((e) => e.item).sort(), ["big", "normal", "urgent"]);
  assertEquals(queue.promptTokens, 1_000);
  // Even without both less urgent ones 300 tokens do not fit: refused, nobody pushed out.
  assertEquals(queue.push(entry("x", { priority: -2, promptTokens: 300 })), {
    queued: false,
    limit: "requests",
  });
  assertEquals(queue.size, 3);
});

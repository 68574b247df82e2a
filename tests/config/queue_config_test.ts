import { assertEquals } from "../assert.ts";
import { problemsOf } from "./config_problems.ts";

const model = (queue: Record<string, unknown>) => ({
  models: [{
    name: "m",
    tokenizer: { mode: "none" },
    kv: { store: "none" },
    slo: { queue },
    instances: [{ id: "a", url: "http://a:8000" }],
  }],
});

Deno.test("late binding's bound needs the queue it holds requests in, and whole tokens", () => {
  assertEquals(problemsOf(model({ enabled: true, holdAboveTokens: 0 })), []);
  assertEquals(problemsOf(model({ holdAboveTokens: 8192 })), [
    "models[0].slo.queue.holdAboveTokens: holdAboveTokens holds requests in the flow-control " +
    "queue: set enabled: true",
  ]);
  assertEquals(problemsOf(model({ enabled: true, holdAboveTokens: -1 })).length, 1);
  assertEquals(problemsOf(model({ enabled: true, holdAboveTokens: 1.5 })).length, 1);
});

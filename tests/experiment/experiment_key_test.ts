import { assert, assertEquals, assertNotEquals, assertThrows } from "../assert.ts";
import {
  experimentKeyValue,
  parseExperimentKey,
  promptOpening,
} from "../../src/experiment/experiment_key.ts";

const request = (headers: Record<string, string>, body: Record<string, unknown> = {}) => ({
  headers: new Headers(headers),
  body,
});

Deno.test("parseExperimentKey() reads every key form and rejects others", () => {
  assertEquals(parseExperimentKey("header:X-Session-Id"), { kind: "header", name: "x-session-id" });
  assertEquals(parseExperimentKey("user"), { kind: "user" });
  assertEquals(parseExperimentKey("api_key"), { kind: "api_key" });
  assertEquals(parseExperimentKey("prefix"), { kind: "prefix" });
  assertEquals(parseExperimentKey("random"), { kind: "random" });
  assertThrows(() => parseExperimentKey("cookie"), Error, "header:NAME");
});

Deno.test("experimentKeyValue() reads headers, the user field and the bearer token", () => {
  const header = parseExperimentKey("header:x-session-id");
  assertEquals(experimentKeyValue(header, request({ "X-Session-Id": " s1 " }), 1024), "s1");
  assertEquals(experimentKeyValue(header, request({ "x-session-id": "  " }), 1024), undefined);
  assertEquals(experimentKeyValue(header, request({}), 1024), undefined);
  const user = parseExperimentKey("user");
  assertEquals(experimentKeyValue(user, request({}, { user: "alice" }), 1024), "alice");
  assertEquals(experimentKeyValue(user, request({}, { user: 42 }), 1024), undefined);
  const apiKey = parseExperimentKey("api_key");
  assertEquals(
    experimentKeyValue(apiKey, request({ authorization: "Bearer sk-123" }), 1024),
    "sk-123",
  );
  assertEquals(
    experimentKeyValue(apiKey, request({ authorization: "Basic xyz" }), 1024),
    undefined,
  );
  assertEquals(experimentKeyValue(parseExperimentKey("random"), request({}), 1024), null);
});

Deno.test("promptOpening() is the same on every turn of a chat and differs between chats", () => {
  const system = { role: "system", content: "You are a helpful assistant." };
  const turn1 = { messages: [system, { role: "user", content: "What is KV caching?" }] };
  const turn2 = {
    messages: [
      ...turn1.messages,
      { role: "assistant", content: "It stores attention keys and values." },
      { role: "user", content: "And prefix caching?" },
    ],
  };
  const other = { messages: [system, { role: "user", content: "Write a haiku." }] };
  assertEquals(promptOpening(turn1, 1024), promptOpening(turn2, 1024));
  assertNotEquals(promptOpening(turn1, 1024), promptOpening(other, 1024));
});

Deno.test("promptOpening() cuts text and token prompts at prefixTokens", () => {
  const long = "a".repeat(100) + "b".repeat(100);
  assertEquals(promptOpening({ prompt: long }, 25), "text:" + "a".repeat(100));
  assertEquals(promptOpening({ prompt: [1, 2, 3, 4, 5] }, 3), "ids:1,2,3");
  assertEquals(promptOpening({ prompt: [[7, 8, 9], [1]] }, 2), "ids:7,8");
  assertEquals(promptOpening({ prompt: ["first", "second"] }, 10), "text:first");
  assertEquals(promptOpening({ prompt: "" }, 10), undefined);
  assert(promptOpening({}, 10) === undefined);
});

/** The access line's fields for whole and disaggregated requests. */
import { assertEquals } from "../assert.ts";
import { accessLogFields, accessLogObserver } from "../../src/telemetry/access_log.ts";
import { finishedRecord } from "./records.ts";

Deno.test("a disaggregated request names its prefill and decode instances; the hit is the prefill's", () => {
  const record = finishedRecord({ instance: "d0", local: { p0: 512, d0: 0 }, ttftS: 0.25 });
  record.prefillInstanceId = "p0";
  const fields = accessLogFields(record);
  assertEquals(fields.prefillInstance, "p0");
  assertEquals(fields.decodeInstance, "d0");
  assertEquals(fields.instance, undefined);
  assertEquals(fields.predictedHitTokens, 512);
  assertEquals(fields.ttftMs, 250);
});

Deno.test("failed attempts are listed by instance and failure kind, never the engine's text", () => {
  const record = finishedRecord({ instance: "e1", local: { e0: 0, e1: 0 } });
  record.attempts.unshift({
    instanceId: "e0",
    startedAt: 0,
    failure: "http_5xx",
    error: "HTTP 500: prompt 'secret words' was too long",
  });
  const fields = accessLogFields(record);
  assertEquals(fields.attempts, 2);
  assertEquals(fields.failedAttempts, ["e0:http_5xx"]);
  assertEquals(JSON.stringify(fields).includes("secret words"), false);
});

Deno.test("the observer writes one info line named request per finished request", () => {
  const lines: [string, Record<string, unknown> | undefined][] = [];
  const observer = accessLogObserver((message, fields) => lines.push([message, fields]));
  observer.onFinished(finishedRecord({ instance: "e0", status: 429, outcome: "rejected" }));
  assertEquals(lines.length, 1);
  assertEquals(lines[0][0], "request");
  assertEquals(lines[0][1]?.level, "info");
  assertEquals(lines[0][1]?.status, 429);
  assertEquals(lines[0][1]?.outcome, "rejected");
});

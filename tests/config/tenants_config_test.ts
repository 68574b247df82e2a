import { assertEquals, assertMatch } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { problemsOf } from "./config_problems.ts";
import { TenantGate } from "../../src/gateway/tenant_gate.ts";
import { parseOpenAIRequest } from "../../src/openai/request.ts";

const MODELS = [{
  name: "m",
  tokenizer: { mode: "none" },
  kv: { store: "none" },
  instances: [{ id: "a", url: "http://127.0.0.1:8001" }],
}];

const problems = (tenants: unknown, env: Record<string, string> = {}) =>
  problemsOf({ tenants, models: MODELS }, { env: (name) => env[name] });

Deno.test("tenants: identities name exactly one tenant, and 'other' is reserved", () => {
  const found = problems({
    list: [
      { name: "a", match: ["k1"], requestsPerS: 1 },
      { name: "a", match: ["k1"], requestsPerS: 1 },
      { name: "other", match: ["k2"] },
    ],
  });
  assertEquals(found.length, 3, found.join("\n"));
  assertMatch(found.join("\n"), /duplicate tenant "a"/);
  assertMatch(found.join("\n"), /already matches tenant "a"/);
  assertMatch(found.join("\n"), /"other" names the clients no tenant matches/);
});

Deno.test("tenants: an identity may come from the environment, and a missing one is a problem", () => {
  const tenants = { list: [{ name: "a", match: ["env:TEAM_A_KEY"], requestsPerS: 1 }] };
  const config = resolveConfig({ tenants, models: MODELS }, {
    env: (name) => name === "TEAM_A_KEY" ? "sk-secret" : undefined,
  });
  assertEquals(config.tenants?.list[0].match, ["sk-secret"]);
  assertEquals(config.tenants?.by, "api_key");
  assertMatch(problems(tenants).join("\n"), /TEAM_A_KEY is not set/);
});

Deno.test("TenantGate names the tenant by API key, body user or header, as configured", () => {
  const body = (user: string) =>
    parseOpenAIRequest(
      "completions",
      new TextEncoder().encode(JSON.stringify({ model: "m", prompt: "hi", user })),
    );
  const request = new Request("http://x/", {
    headers: { authorization: "Bearer k1", "x-team": "k3" },
  });
  const list = [
    { name: "by-key", match: ["k1"], requestsPerS: 1, burstS: 1, weight: 1, priority: 0 },
    { name: "by-user", match: ["k2"], requestsPerS: 1, burstS: 1, weight: 1, priority: 0 },
    { name: "by-header", match: ["k3"], requestsPerS: 1, burstS: 1, weight: 1, priority: 0 },
  ];
  const now = () => 0;
  assertEquals(
    new TenantGate({ by: "api_key", list }, now).tenantOf(request, body("k2")),
    "by-key",
  );
  assertEquals(new TenantGate({ by: "user", list }, now).tenantOf(request, body("k2")), "by-user");
  assertEquals(
    new TenantGate({ by: "header:x-team", list }, now).tenantOf(request, body("k2")),
    "by-header",
  );
  assertEquals(new TenantGate(undefined, now).tenantOf(request, body("k2")), undefined);
});

Deno.test("TenantGate keeps its buckets across a reload that leaves the section as it was", () => {
  const section = {
    by: "api_key" as const,
    list: [{ name: "a", match: ["k"], requestsPerS: 1, burstS: 1, weight: 1, priority: 0 }],
  };
  const gate = new TenantGate(section, () => 0);
  const headers = new Headers();
  gate.charge("a", "requests", 1, headers);
  gate.sync(structuredClone(section));
  let refused = false;
  try {
    gate.charge("a", "requests", 1, headers);
  } catch {
    refused = true;
  }
  assertEquals(refused, true, "the emptied bucket was not refilled by the reload");
  gate.sync({ ...section, list: [{ ...section.list[0], requestsPerS: 5 }] });
  gate.charge("a", "requests", 1, headers); // a changed section starts afresh
});

Deno.test("tenants: minPriority may not be less urgent than the tenant's own priority", () => {
  const found = problems({
    list: [
      { name: "a", match: ["k1"], priority: 2, minPriority: 5 },
      { name: "b", match: ["k2"], priority: 2, minPriority: -3 },
    ],
    others: { priority: 0, minPriority: 1 },
  });
  assertEquals(found.length, 2, found.join("\n"));
  assertMatch(
    found[0],
    /tenants\.list\[0\]\.minPriority.*less urgent than the tenant's own priority 2/,
  );
  assertMatch(found[1], /tenants\.others\.minPriority/);
});

import { assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { problemsOf } from "./config_problems.ts";

const model = (instances: unknown[], extra: Record<string, unknown> = {}) => ({
  name: "m",
  tokenizer: { mode: "none" },
  kv: { store: "none" },
  instances,
  ...extra,
});

Deno.test("resolveConfig() refuses an instance URL with credentials, without echoing them", () => {
  const found = problemsOf({
    models: [model([{ id: "a", url: "http://admin:s3cret@10.0.0.1:8000" }])],
  });
  assertEquals(found.length, 1);
  assertEquals(found[0].startsWith("models[0].instances[0].url"), true, found[0]);
  assertEquals(found[0].includes("credentials"), true, found[0]);
  assertEquals(found[0].includes("s3cret"), false, "the password is never repeated");
});

Deno.test("resolveConfig() takes admin.allowedInstanceHosts of names, addresses and CIDR blocks", () => {
  const config = resolveConfig({
    admin: { allowedInstanceHosts: ["10.0.0.0/8", "fd00::/8", "vllm.ns.svc", "192.168.1.7"] },
    models: [model([{ id: "a", url: "http://10.0.0.1:8000" }])],
  });
  assertEquals(config.admin.allowedInstanceHosts?.length, 4);
  const found = problemsOf({
    admin: { allowedInstanceHosts: ["10.0.0.0/40", "not a host"] },
    models: [model([{ id: "a", url: "http://10.0.0.1:8000" }])],
  });
  assertEquals(found.length, 2);
  assertEquals(found[0].startsWith("admin.allowedInstanceHosts[0]"), true, found[0]);
  assertEquals(found[1].startsWith("admin.allowedInstanceHosts[1]"), true, found[1]);
});

Deno.test("resolveConfig() takes listen.trustedProxies of addresses and CIDR blocks, not names", () => {
  const config = resolveConfig({
    listen: { trustedProxies: ["10.0.0.0/8", "fd00::/8", "192.168.1.7"] },
    models: [model([{ id: "a", url: "http://10.0.0.1:8000" }])],
  });
  assertEquals(config.listen.trustedProxies.length, 3);
  const found = problemsOf({
    listen: { trustedProxies: ["ingress.ns.svc", "10.0.0.0/40"] },
    models: [model([{ id: "a", url: "http://10.0.0.1:8000" }])],
  });
  assertEquals(found.length, 2, found.join("\n"));
  assertEquals(found.every((p) => p.startsWith("listen.trustedProxies[")), true, found.join("\n"));
});

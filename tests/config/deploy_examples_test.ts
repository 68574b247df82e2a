import { assertEquals } from "../assert.ts";
import { parseConfigText } from "../../src/config/load.ts";
import { policyProblems } from "../../src/scheduling/named_policy.ts";

const env = (name: string) => (name === "TIDEGATE_ADMIN_TOKEN" ? "example-token" : undefined);

Deno.test("every example config in deploy/examples validates", async () => {
  const dir = new URL("../../deploy/examples/", import.meta.url);
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (!/\.(json|ya?ml)$/.test(entry.name)) continue;
    const text = await Deno.readTextFile(new URL(entry.name, dir));
    const config = parseConfigText(text, entry.name, { env, baseDir: "/etc/tidegate" });
    assertEquals(config.models.length > 0, true);
    assertEquals(policyProblems(config), [], entry.name);
    names.push(entry.name);
  }
  assertEquals(names.sort(), ["router.json", "router.yaml", "sglang_hicache.json"]);
});

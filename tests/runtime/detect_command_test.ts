import { assertEquals } from "../assert.ts";
import { detectCommand } from "../../src/runtime/detect_command.ts";

Deno.test("detectCommand names the config file and model as one shell word each", () => {
  assertEquals(
    detectCommand("qwen3", "/etc/tidegate/router.yaml"),
    "npx -y deno@2.9.6 task keys --detect --config /etc/tidegate/router.yaml --model qwen3",
  );
  assertEquals(
    detectCommand("it's", "my dir/r.json"),
    `npx -y deno@2.9.6 task keys --detect --config 'my dir/r.json' --model 'it'\\''s'`,
  );
  assertEquals(
    detectCommand("m", undefined),
    "npx -y deno@2.9.6 task keys --detect --config <config file> --model m",
  );
});

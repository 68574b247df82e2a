import { assertEquals } from "../assert.ts";
import { ResponseHomes } from "../../src/cluster/response_homes.ts";

Deno.test("a response's home is found until it expires; the oldest goes first past the bound", () => {
  const homes = new ResponseHomes(1_000, 2);
  homes.remember("r1", { model: "m", instanceId: "a" }, 0);
  assertEquals(homes.find("r1", 999), { model: "m", instanceId: "a" });
  assertEquals(homes.find("r1", 1_000), undefined, "expired");
  homes.remember("r2", { model: "m", instanceId: "a" }, 0);
  homes.remember("r3", { model: "m", instanceId: "b" }, 0);
  homes.remember("r4", { model: "m", instanceId: "c" }, 0);
  assertEquals(homes.find("r2", 1), undefined, "the oldest was dropped");
  assertEquals(homes.find("r4", 1)?.instanceId, "c");
  assertEquals(homes.size, 2);
});

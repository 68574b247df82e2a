import { assert, assertEquals } from "../assert.ts";
import { AdapterCatalog } from "../../src/cluster/adapter_catalog.ts";

const listing = (...adapters: string[]) => [
  { id: "base", parent: null, root: "base" },
  ...adapters.map((id) => ({ id, parent: "base", root: `/adapters/${id}` })),
];

Deno.test("the catalog knows each instance's adapters from its listing, and nothing before one", () => {
  const catalog = new AdapterCatalog();
  assert(!catalog.known);
  catalog.update("a", listing("sql"));
  catalog.update("b", listing("sql", "chat"));
  catalog.update("c", listing());
  assert(catalog.known);
  assertEquals(catalog.holders("sql"), ["a", "b"]);
  assertEquals(catalog.holders("chat"), ["b"]);
  assertEquals(catalog.holders("base"), [], "the base model is no adapter");
  assertEquals(catalog.adapters().get("chat"), { path: "/adapters/chat", instances: ["b"] });
  catalog.update("b", listing()); // unloaded there
  assertEquals(catalog.holders("chat"), []);
  catalog.noteLoaded("c", "chat", "/x");
  assertEquals(catalog.holders("chat"), ["c"]);
  catalog.forget("a");
  assertEquals(catalog.holders("sql"), []);
});

import { assert, assertEquals } from "../assert.ts";
import { RouteSupport } from "../../src/cluster/route_support.ts";

Deno.test("an instance marked as not serving a path is skipped for that path, model and time only", () => {
  const routes = new RouteSupport(1_000);
  routes.markNotServed("m", "a", "/v1/embeddings", 0);
  assertEquals(routes.serves("m", "a", "/v1/embeddings", 999), false);
  assert(routes.serves("m", "a", "/tokenize", 500), "another path");
  assert(routes.serves("m", "b", "/v1/embeddings", 500), "another instance");
  assert(routes.serves("other", "a", "/v1/embeddings", 500), "another model");
  assert(routes.serves("m", "a", "/v1/embeddings", 1_000), "tried again once the memory expires");
  assert(routes.serves("m", "a", "/v1/embeddings", 1_001), "and forgotten");
});

Deno.test("the memory is bounded: past maxEntries the oldest mark goes first", () => {
  const routes = new RouteSupport(60_000, 3);
  for (const id of ["a", "b", "c", "d"]) routes.markNotServed("m", id, "/pooling", 0);
  assert(routes.serves("m", "a", "/pooling", 1), "the oldest was dropped");
  for (const id of ["b", "c", "d"]) assertEquals(routes.serves("m", id, "/pooling", 1), false);
  routes.markNotServed("m", "b", "/pooling", 2); // marked again: now the newest
  routes.markNotServed("m", "e", "/pooling", 3);
  assertEquals(routes.serves("m", "b", "/pooling", 4), false);
  assert(routes.serves("m", "c", "/pooling", 4), "c was the oldest now");
});

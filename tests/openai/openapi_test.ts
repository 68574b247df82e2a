import { assert, assertEquals } from "../assert.ts";
import { openApiDocument } from "../../src/openai/openapi.ts";
import { openaiRoutes } from "../../routes/openai.ts";
import type { ModelRegistry } from "../../src/runtime/model_registry.ts";
import type { Gateway } from "../../src/gateway/gateway.ts";
import { loadOnlyModel, startRouter } from "../support/harness.ts";

type Paths = Record<string, Record<string, { requestBody?: unknown }>>;

Deno.test("the OpenAPI description names every route the router's API serves, and no other", () => {
  const unused = () => {
    throw new Error("not called");
  };
  const app = openaiRoutes(
    { handleInference: unused, handleStoredResponse: unused } as unknown as Gateway,
    {} as ModelRegistry,
  );
  const served = app.routes.map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, "{$1}")}`);
  const paths = openApiDocument("0").paths as Paths;
  const described = Object.entries(paths).flatMap(([path, ops]) =>
    Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`)
  );
  assertEquals(new Set(described), new Set(served));
  assertEquals(described.length, served.length);
});

Deno.test("completion and chat bodies are the parsers' own schemas", () => {
  const paths = openApiDocument("0").paths as Paths;
  const schemaOf = (path: string) =>
    (paths[path].post.requestBody as {
      content: { "application/json": { schema: { required: string[]; properties: object } } };
    }).content["application/json"].schema;
  assertEquals(schemaOf("/v1/completions").required.sort(), ["model", "prompt"]);
  assertEquals(schemaOf("/v1/chat/completions").required.sort(), ["messages", "model"]);
  assert("cache_salt" in schemaOf("/v1/chat/completions").properties);
});

Deno.test("GET /openapi.json answers the description with the package's version", async () => {
  const { router, url } = await startRouter([
    loadOnlyModel("m", { instances: [{ id: "a", url: "http://127.0.0.1:9" }] }),
  ], { background: false });
  try {
    const response = await fetch(`${url}/openapi.json`);
    assertEquals(response.status, 200);
    const document = await response.json();
    assertEquals(document.openapi, "3.1.0");
    const project = JSON.parse(
      await Deno.readTextFile(new URL("../../deno.json", import.meta.url)),
    );
    assertEquals(document.info.version, project.version);
    assert("/v1/responses/{id}" in document.paths);
  } finally {
    await router.close();
  }
});

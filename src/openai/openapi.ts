/**
 * The OpenAPI 3.1 description of the router's API surface (`GET /openapi.json`). Completions and
 * chat bodies are the parsers' own zod schemas (src/openai/request.ts) turned into JSON Schema;
 * the other routes' bodies state what the router reads of them (the engine judges the rest).
 * tests/openai/openapi_test.ts checks that it names every route the router serves, and no other.
 */
import { z } from "zod";
import { INFERENCE_PATHS, LOAD_ROUTED_PATHS, UPLOAD_PATHS } from "./endpoints.ts";
import { ChatRequestSchema, CompletionRequestSchema } from "./request.ts";

type Json = Record<string, unknown>;

/** The package's version, as deno.json names it (tests/openai/openapi_test.ts keeps them equal). */
export const VERSION = "0.4.0";

const anyObject = (required: string[] = [], properties: Json = {}): Json => ({
  type: "object",
  required,
  properties,
  additionalProperties: true,
});

const model = { type: "string", description: "A served model name, alias or LoRA adapter" };

function jsonSchema(schema: z.ZodType): Json {
  const { $schema: _draft, ...rest } = z.toJSONSchema(schema, {
    unrepresentable: "any",
    io: "input",
  }) as Json;
  return rest;
}

/** Request bodies by route name: the parsers' schemas, or the fields the router reads. */
function bodies(): Record<string, Json> {
  return {
    completions: jsonSchema(CompletionRequestSchema),
    chat: jsonSchema(ChatRequestSchema),
    messages: anyObject(["model", "messages", "max_tokens"], { model }),
    responses: anyObject(["model", "input"], {
      model,
      previous_response_id: { type: "string" },
    }),
    generate: anyObject([], {
      model: { ...model, description: "Which served model (SGLang ignores it); optional" },
      text: { anyOf: [{ type: "string" }, { type: "array", items: { type: "string" } }] },
      input_ids: {
        anyOf: [
          { type: "array", items: { type: "integer" } },
          { type: "array", items: { type: "array", items: { type: "integer" } } },
        ],
      },
      sampling_params: { anyOf: [{ type: "object" }, { type: "array" }] },
      stream: { type: "boolean" },
      rid: { anyOf: [{ type: "string" }, { type: "array", items: { type: "string" } }] },
    }),
  };
}

function operation(summary: string, body?: Json, streams = false): Json {
  const content: Json = { "application/json": { schema: { type: "object" } } };
  if (streams) content["text/event-stream"] = { schema: { type: "string" } };
  return {
    summary,
    ...(body
      ? { requestBody: { required: true, content: { "application/json": { schema: body } } } }
      : {}),
    responses: {
      "200": { description: "The engine's answer, relayed", content },
      default: { description: "An error in the route's API's own shape (docs/api.md#errors)" },
    },
  };
}

/** A multipart upload: the router reads `model` only and streams the rest to the engine. */
function uploadOperation(summary: string): Json {
  const form = anyObject(["file"], {
    file: { type: "string", format: "binary" },
    model,
  });
  return {
    ...operation(summary),
    requestBody: { required: true, content: { "multipart/form-data": { schema: form } } },
  };
}

const SUMMARIES: Record<string, string> = {
  completions: "OpenAI completions, routed cache-aware",
  chat: "OpenAI chat completions, routed cache-aware",
  messages: "Anthropic Messages as vLLM serves it, routed cache-aware",
  responses: "OpenAI Responses as vLLM serves it, routed cache-aware or to its stored response",
  generate: "SGLang's native generate, routed cache-aware to the model's SGLang engines",
};

export function openApiDocument(version = VERSION): Json {
  const paths: Record<string, Json> = {};
  const schemas = bodies();
  for (const [name, path] of Object.entries(INFERENCE_PATHS)) {
    paths[path] = { post: operation(SUMMARIES[name], schemas[name], true) };
  }
  for (const [name, routePaths] of Object.entries(LOAD_ROUTED_PATHS)) {
    for (const path of routePaths) {
      paths[path] = { post: operation(`${name}, routed by load`, anyObject([], { model })) };
    }
  }
  for (const [name, path] of Object.entries(UPLOAD_PATHS)) {
    paths[path] = { post: uploadOperation(`Audio ${name} as vLLM serves them, routed by load`) };
  }
  const id = { name: "id", in: "path", required: true, schema: { type: "string" } };
  paths["/v1/responses/{id}"] = {
    get: { ...operation("A stored response, from the engine that stored it"), parameters: [id] },
  };
  paths["/v1/responses/{id}/cancel"] = {
    post: { ...operation("Cancels a stored background response"), parameters: [id] },
  };
  paths["/v1/models"] = { get: operation("The served models, aliases and LoRA adapters") };
  paths["/openapi.json"] = { get: operation("This description") };
  return {
    openapi: "3.1.0",
    info: {
      title: "tidegate",
      version,
      description: "A cache-aware router in front of vLLM and SGLang engines (docs/api.md).",
    },
    paths,
  };
}

import { type Context, Hono } from "hono";
import type { ConnectionEnv } from "../src/admin/auth.ts";
import type { ClientConnection, Gateway } from "../src/gateway/gateway.ts";
import {
  type JsonEndpoint,
  LOAD_ROUTED_PATHS,
  UPLOAD_PATHS,
  type UploadEndpoint,
} from "../src/openai/endpoints.ts";
import { errorAnswerFor } from "../src/openai/error_answer.ts";
import { openApiDocument } from "../src/openai/openapi.ts";
import { HttpError } from "../src/openai/errors.ts";
import type { ModelRegistry } from "../src/runtime/model_registry.ts";
import { bodyBounds, ClientLeftError, readBody } from "./read_body.ts";

type ConnectionBindings = { Bindings: ConnectionEnv };

/**
 * The engines' API surface: OpenAI completions and chats (stream or not), Anthropic Messages,
 * Responses, SGLang's /generate, models, and the pooling and utility routes
 * (src/openai/endpoints.ts).
 */
export function openaiRoutes(
  gateway: Pick<Gateway, "handleInference" | "handleUpload" | "handleStoredResponse">,
  models: ModelRegistry,
): Hono<ConnectionBindings> {
  const app = new Hono<ConnectionBindings>();
  const inference = (endpoint: JsonEndpoint) => async (c: Context<ConnectionBindings>) => {
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      bytes = await readBody(c.req.raw, bodyBounds(models.config));
    } catch (error) {
      // Nobody is left to answer: counted as the client's, not logged as the router's fault.
      if (error instanceof ClientLeftError) return new Response(null, { status: 499 });
      // Too large, too slow, malformed: in the shape of the route's own clients.
      if (error instanceof HttpError) return errorAnswerFor(endpoint)(error);
      throw error;
    }
    return gateway.handleInference(endpoint, c.req.raw, bytes, clientOf(c));
  };
  app.post("/v1/completions", inference("completions"));
  app.post("/v1/chat/completions", inference("chat"));
  app.post("/v1/messages", inference("messages"));
  app.post("/v1/responses", inference("responses"));
  app.post("/generate", inference("generate"));
  // A stored response lives on the engine that made it: these go there (or are vLLM's 404).
  app.get(
    "/v1/responses/:id",
    (c) => gateway.handleStoredResponse(c.req.raw, c.req.param("id"), "retrieve"),
  );
  app.post(
    "/v1/responses/:id/cancel",
    (c) => gateway.handleStoredResponse(c.req.raw, c.req.param("id"), "cancel"),
  );
  app.get("/v1/models", (c) => c.json(models.listModels()));
  const description = openApiDocument();
  app.get("/openapi.json", (c) => c.json(description));
  for (const [endpoint, paths] of Object.entries(LOAD_ROUTED_PATHS)) {
    for (const path of paths) app.post(path, inference(endpoint as JsonEndpoint));
  }
  // Audio uploads stream to the engine as they arrive: their body is not read here.
  for (const [endpoint, path] of Object.entries(UPLOAD_PATHS)) {
    app.post(path, (c) => gateway.handleUpload(endpoint as UploadEndpoint, c.req.raw, clientOf(c)));
  }
  return app;
}

/** The client's connection: its abort signal and, over TCP, its address. */
function clientOf(c: Context<ConnectionBindings>): ClientConnection {
  const remote = c.env?.remoteAddr;
  return {
    signal: c.req.raw.signal,
    address: remote?.transport === "tcp" ? remote.hostname : undefined,
  };
}

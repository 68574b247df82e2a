import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Gateway } from "../src/gateway/gateway.ts";
import { openAIError } from "../src/openai/errors.ts";
import { readBodyWithin } from "./read_body.ts";

/** The OpenAI-compatible surface: completions, chat completions (stream or not), models. */
export function openaiRoutes(
  gateway: Gateway,
  options: { maxBodyBytes: number; bodyTimeoutMs: number },
): Hono {
  const app = new Hono();
  const limit = bodyLimit({
    maxSize: options.maxBodyBytes,
    onError: () =>
      openAIError(
        413,
        `Request body is larger than the limit of ${options.maxBodyBytes} bytes`,
        { code: "request_too_large" },
      ),
  });
  const inference = (endpoint: "completions" | "chat") => async (c: { req: { raw: Request } }) => {
    const bytes = await readBodyWithin(c.req.raw, options.bodyTimeoutMs);
    return gateway.handleInference(endpoint, c.req.raw, bytes, c.req.raw.signal);
  };
  app.post("/v1/completions", limit, inference("completions"));
  app.post("/v1/chat/completions", limit, inference("chat"));
  app.get("/v1/models", (c) => c.json(gateway.listModels()));
  return app;
}

import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { ConnectionEnv } from "../src/admin/auth.ts";
import type { Gateway } from "../src/gateway/gateway.ts";
import { openAIError } from "../src/openai/errors.ts";
import { readBodyWithin } from "./read_body.ts";

type ConnectionBindings = { Bindings: ConnectionEnv };

/** The OpenAI-compatible surface: completions, chat completions (stream or not), models. */
export function openaiRoutes(
  gateway: Gateway,
  options: { maxBodyBytes: number },
): Hono<ConnectionBindings> {
  const app = new Hono<ConnectionBindings>();
  const limit = bodyLimit({
    maxSize: options.maxBodyBytes,
    onError: () =>
      openAIError(
        413,
        `Request body is larger than the limit of ${options.maxBodyBytes} bytes`,
        { code: "request_too_large" },
      ),
  });
  const inference =
    (endpoint: "completions" | "chat") => async (c: Context<ConnectionBindings>) => {
      // Read per request: a reload's new deadline applies at once.
      const bodyTimeoutMs = gateway.config.limits.clientBodyTimeoutMs;
      const bytes = await readBodyWithin(c.req.raw, bodyTimeoutMs);
      const address = c.env?.remoteAddr?.transport === "tcp"
        ? c.env.remoteAddr.hostname
        : undefined;
      return gateway.handleInference(endpoint, c.req.raw, bytes, {
        signal: c.req.raw.signal,
        address,
      });
    };
  app.post("/v1/completions", limit, inference("completions"));
  app.post("/v1/chat/completions", limit, inference("chat"));
  app.get("/v1/models", (c) => c.json(gateway.listModels()));
  return app;
}

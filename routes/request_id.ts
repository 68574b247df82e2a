import type { MiddlewareHandler } from "hono";

/**
 * Every answer carries `x-request-id`: the client's (up to 200 characters) or a fresh one. The
 * inference path sets its own (it also forwards it to the engine); this covers every other
 * answer, 404s and errors included.
 */
export function requestIds(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    if (c.res.headers.has("x-request-id")) return;
    const id = c.req.header("x-request-id")?.slice(0, 200) || crypto.randomUUID();
    try {
      c.res.headers.set("x-request-id", id);
    } catch {
      // Immutable headers (a response passed through as is): answer with a copy.
      const response = new Response(c.res.body, c.res);
      response.headers.set("x-request-id", id);
      c.res = response;
    }
  };
}

import type { Context } from "hono";
import { HttpError } from "../src/openai/errors.ts";

/** The request's JSON body; a 400 naming the expected `shape` when it is not JSON. */
export async function readJsonBody(c: Context, shape: string): Promise<unknown> {
  try {
    return await c.req.json();
  } catch {
    throw new HttpError(400, `The request body must be JSON: ${shape}`, { code: "invalid_json" });
  }
}

import type { Context } from "hono";
import { HttpError } from "../src/openai/errors.ts";
import { type BodyBounds, readBody } from "./read_body.ts";

/**
 * The request's JSON body, read within `bounds` (routes/read_body.ts); a 400 naming the expected
 * `shape` when it is not JSON.
 */
export async function readJsonBody(
  c: Context,
  shape: string,
  bounds: BodyBounds,
): Promise<unknown> {
  const bytes = await readBody(c.req.raw, bounds);
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new HttpError(400, `The request body must be JSON: ${shape}`, { code: "invalid_json" });
  }
}

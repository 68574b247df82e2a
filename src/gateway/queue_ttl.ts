import { HttpError } from "../openai/errors.ts";

/**
 * How long a request may wait in the flow-control queue: the model's TTL, or less when the client
 * asks with `x-tidegate-queue-ttl` (seconds; 0 asks not to wait at all).
 */
export function queueTtlS(request: Request, configTtlS: number): number {
  const header = request.headers.get("x-tidegate-queue-ttl")?.trim();
  if (header === undefined) return configTtlS;
  const asked = Number(header);
  if (!/^\d{1,9}(\.\d{1,9})?$/.test(header) || !Number.isFinite(asked)) {
    throw new HttpError(
      400,
      `x-tidegate-queue-ttl must be a number of seconds >= 0, got "${header.slice(0, 40)}"`,
      { code: "invalid_queue_ttl" },
    );
  }
  return Math.min(configTtlS, asked);
}

import type { QueueConfig } from "../config/schema.ts";
import { HttpError } from "../openai/errors.ts";
import type { AdmissionRefusal } from "../scheduling/admission.ts";
import type { WaitOutcome } from "./flow_control.ts";

/** A wait in the flow-control queue that ended unserved: the error and its Retry-After. */
export interface QueueRefusal {
  error: HttpError;
  retryAfterS: number;
}

/**
 * The answer to a wait that ended full, pushed out, expired or at shutdown (flow_control.ts):
 * 429 for a limit, 503 when the router drains; `lastRefusal` is admission's latest verdict on
 * the request, whose Retry-After it repeats.
 */
export function queueRefusal(
  outcome: Extract<WaitOutcome, { kind: "full" | "pushed_out" | "expired" | "shutting_down" }>,
  context: { model: string; queue: QueueConfig; waitedS: number; lastRefusal: AdmissionRefusal },
): QueueRefusal {
  const { model, queue, waitedS, lastRefusal } = context;
  const retryAfterS = lastRefusal.retryAfterS;
  const limit = (message: string, code: string) => ({
    error: new HttpError(429, message, { type: "rate_limit_error", code }),
    retryAfterS,
  });
  switch (outcome.kind) {
    case "full":
      return limit(
        `The queue of model '${model}' is full (${queue.maxRequests} requests, ` +
          `${queue.maxPromptTokens} prompt tokens); retry after ${retryAfterS} s.`,
        "queue_full",
      );
    case "pushed_out":
      return limit(
        `The queue of model '${model}' is full and a more urgent request took this one's place; ` +
          `retry after ${retryAfterS} s.`,
        "queue_full",
      );
    case "expired":
      return limit(
        `Not admitted within ${waitedS.toFixed(1)} s in the queue of model '${model}' ` +
          `(${lastRefusal.reason}); retry after ${retryAfterS} s.`,
        "queue_timeout",
      );
    case "shutting_down":
      return {
        error: new HttpError(503, "The router is shutting down; retry on another replica.", {
          code: "router_shutting_down",
        }),
        retryAfterS: 1,
      };
  }
}

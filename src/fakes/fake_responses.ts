/**
 * The fake engine's Responses API, in vLLM's shapes (vllm/entrypoints/openai/responses, vLLM
 * 0.32): a `response` object, or the events response.created, response.output_text.delta per
 * token and response.completed; stored responses kept in the engine's own memory (as vLLM with
 * VLLM_ENABLE_RESPONSES_API_STORE), so only this engine can continue, retrieve or cancel them.
 */

export interface ResponseUsageInput {
  promptTokens: number;
  outputTokens: number;
  cachedTokens?: number;
}

export function responseObject(
  id: string,
  model: string,
  text: string,
  status: "in_progress" | "completed",
  usage: ResponseUsageInput | null,
): Record<string, unknown> {
  return {
    id,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    model,
    status,
    output: status === "completed"
      ? [{
        id: `msg_${id.slice(5)}`,
        type: "message",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text, annotations: [] }],
      }]
      : [],
    usage: usage && {
      input_tokens: usage.promptTokens,
      input_tokens_details: { cached_tokens: usage.cachedTokens ?? 0 },
      output_tokens: usage.outputTokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: usage.promptTokens + usage.outputTokens,
    },
  };
}

let sequence = 0;

function event(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${
    JSON.stringify({ type, sequence_number: sequence++, ...data })
  }\n\n`;
}

export function responseCreated(response: Record<string, unknown>): string {
  return event("response.created", { response });
}

export function responseDelta(itemId: string, text: string): string {
  return event("response.output_text.delta", {
    item_id: itemId,
    output_index: 0,
    content_index: 0,
    delta: text,
  });
}

export function responseCompleted(response: Record<string, unknown>): string {
  return event("response.completed", { response });
}

/** vLLM's 404 for an id it does not hold. */
export function responseNotFound(responseId: string): Record<string, unknown> {
  return {
    error: {
      message: `Response with id '${responseId}' not found.`,
      type: "invalid_request_error",
      param: "response_id",
      code: 404,
    },
  };
}

/** The engine's stored responses, bounded like any fake's records. */
export class ResponseStore {
  readonly #responses = new Map<string, Record<string, unknown>>();

  constructor(readonly max = 1000) {}

  put(response: Record<string, unknown>): void {
    this.#responses.set(response.id as string, response);
    if (this.#responses.size > this.max) {
      this.#responses.delete(this.#responses.keys().next().value!);
    }
  }

  get(id: string): Record<string, unknown> | undefined {
    return this.#responses.get(id);
  }

  /** The conversation so far, as the next request's prompt starts with it. */
  history(id: string): string {
    const response = this.#responses.get(id);
    return response ? JSON.stringify(response.output) : "";
  }
}

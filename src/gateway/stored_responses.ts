/**
 * Responses API responses live in the memory of the engine that made them: this remembers which
 * instance answered each response id, narrows a continuation (`previous_response_id`) to it, and
 * relays `GET /v1/responses/{id}` and `POST .../cancel` there. An id no instance known to the
 * router stored, or whose instance left the pool, gets vLLM's own 404.
 */
import { ResponseHomes } from "../cluster/response_homes.ts";
import type { RequestRecord } from "../contracts.ts";
import { HttpError, quoted } from "../openai/errors.ts";
import { joinUrl } from "../proxy/forward.ts";
import { upstreamHeaders } from "../proxy/hop_headers.ts";
import type { ModelRuntime } from "../runtime/model_runtime.ts";
import type { ModelRegistry } from "../runtime/model_registry.ts";

export interface StoredResponsesDeps {
  fetch: typeof fetch;
  now: () => number;
  models: Pick<ModelRegistry, "resolve">;
  /** How long the storing engine has to answer a retrieval or cancel. */
  timeoutMs: () => number;
}

export class StoredResponses {
  readonly #homes: ResponseHomes;
  readonly #deps: StoredResponsesDeps;

  constructor(deps: StoredResponsesDeps, homes = new ResponseHomes()) {
    this.#deps = deps;
    this.#homes = homes;
  }

  /** The one instance a continuation of `responseId` may go to; throws vLLM's 404 otherwise. */
  storing(runtime: ModelRuntime, responseId: string): (instanceId: string) => boolean {
    const home = this.#homes.find(responseId, this.#deps.now());
    if (!home || home.model !== runtime.config.name || !runtime.cluster.get(home.instanceId)) {
      throw responseNotFound(responseId);
    }
    return (id) => id === home.instanceId;
  }

  /** A finished request's response id and instance, when its answer ended well. */
  remember(record: RequestRecord): void {
    if (!record.responseId || !record.instanceId || record.status >= 400) return;
    this.#homes.remember(
      record.responseId,
      { model: record.model, instanceId: record.instanceId },
      this.#deps.now(),
    );
  }

  /** A retrieval or cancel, sent to the storing instance and its answer relayed as it is. */
  async relay(
    request: Request,
    responseId: string,
    action: "retrieve" | "cancel",
  ): Promise<Response> {
    const home = this.#homes.find(responseId, this.#deps.now());
    const entry = home &&
      this.#deps.models.resolve(home.model)?.runtime.cluster.get(home.instanceId);
    if (!home || !entry) return responseNotFound(responseId).toResponse();
    const path = `/v1/responses/${encodeURIComponent(responseId)}${
      action === "cancel" ? "/cancel" : ""
    }${new URL(request.url).search}`;
    try {
      const response = await this.#deps.fetch(joinUrl(entry.config.url, path), {
        method: action === "cancel" ? "POST" : "GET",
        headers: upstreamHeaders(request.headers),
        signal: AbortSignal.timeout(this.#deps.timeoutMs()),
      });
      const headers = new Headers(response.headers);
      headers.set("x-tidegate-instance", entry.config.id);
      headers.delete("server");
      return new Response(response.body, { status: response.status, headers });
    } catch (error) {
      return new HttpError(
        502,
        `The instance that stored response '${quoted(responseId)}' (${entry.config.id}) did not ` +
          `answer: ${(error as Error).message}`,
        { code: "upstream_unavailable" },
      ).toResponse();
    }
  }
}

/** vLLM's answer for a response id it does not hold, word for word. */
export function responseNotFound(responseId: string): HttpError {
  return new HttpError(404, `Response with id '${quoted(responseId)}' not found.`, {
    type: "invalid_request_error",
    param: "response_id",
    code: 404,
  });
}

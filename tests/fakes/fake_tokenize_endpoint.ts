/**
 * A fake engine tokenize endpoint on 127.0.0.1:0: vLLM's `POST /tokenize` and SGLang's
 * `POST /v1/tokenize`, answering `{tokens, count, max_model_len}` from a tokenizer the test gives
 * (so engine mode can be compared with local mode), and recording every request body.
 */
import type { ChatEncodeOptions, ChatMessage } from "../../src/tokenize/types.ts";

export interface FakeTokenizeBackend {
  encode(text: string, options: { addSpecialTokens: boolean }): number[];
  encodeChat(messages: ChatMessage[], options: ChatEncodeOptions): number[];
}

export interface FakeTokenizeEndpointOptions {
  backend: FakeTokenizeBackend;
  /** Delay before answering, to exercise timeouts. */
  delayMs?: number;
  /** Answer this status with an error body instead of tokens. */
  failWith?: number;
  maxModelLen?: number;
}

export interface FakeTokenizeEndpoint {
  url: string;
  requests: { path: string; body: Record<string, unknown> }[];
  options: FakeTokenizeEndpointOptions;
  close(): Promise<void>;
}

export function startFakeTokenizeEndpoint(
  options: FakeTokenizeEndpointOptions,
): FakeTokenizeEndpoint {
  const requests: { path: string; body: Record<string, unknown> }[] = [];
  const controller = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: controller.signal, onListen: () => {} },
    async (request) => {
      const path = new URL(request.url).pathname;
      const body = await request.json() as Record<string, unknown>;
      requests.push({ path, body });
      if (options.delayMs) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
      if (options.failWith) {
        return Response.json({ object: "error", message: "boom", code: options.failWith }, {
          status: options.failWith,
        });
      }
      if (path !== "/tokenize" && path !== "/v1/tokenize") {
        return new Response("not found", { status: 404 });
      }
      const tokens = body.messages
        ? options.backend.encodeChat(body.messages as ChatMessage[], {
          tools: body.tools as unknown[] | undefined,
          chatTemplateKwargs: body.chat_template_kwargs as Record<string, unknown> | undefined,
          addGenerationPrompt: (body.add_generation_prompt as boolean | undefined) ?? true,
        })
        : options.backend.encode(body.prompt as string, {
          addSpecialTokens: (body.add_special_tokens as boolean | undefined) ?? true,
        });
      return Response.json({
        tokens,
        count: tokens.length,
        max_model_len: options.maxModelLen ?? 40960,
      });
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    requests,
    options,
    close: async () => {
      controller.abort();
      await server.finished;
    },
  };
}

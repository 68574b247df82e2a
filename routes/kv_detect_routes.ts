import { Hono } from "hono";
import { kvBlockText } from "../src/hashing/detect_report.ts";
import type { ModelRegistry } from "../src/runtime/model_registry.ts";
import type { ModelRuntime } from "../src/runtime/model_runtime.ts";
import { detectForRuntime } from "../src/diagnostics/runtime_detect.ts";
import { HttpError } from "../src/openai/errors.ts";
import type { ChatMessage } from "../src/tokenize/types.ts";
import { readJsonBody } from "./json_body.ts";
import { bodyBounds } from "./read_body.ts";

const SHAPE = '{model, and one of tokens: [ids], prompt: "text", messages: [...], recent: n}';
const MAX_RECENT = 16;

interface DetectBody {
  model?: unknown;
  tokens?: unknown;
  prompt?: unknown;
  messages?: unknown;
  recent?: unknown;
  chat_template_kwargs?: unknown;
}

/**
 * `POST /kv/detect` (mounted under `/admin`, behind src/admin/auth.ts): which key schemes the
 * model's store holds for the given prompt, or for the last `recent` prompts this router
 * dispatched, best first (as `keys --detect`), with the best one's `kv` block.
 */
export function kvDetectRoutes(models: ModelRegistry): Hono {
  const app = new Hono();
  app.post("/kv/detect", async (c) => {
    const body = ((await readJsonBody(c, SHAPE, bodyBounds(models.config))) ?? {}) as DetectBody;
    if (typeof body.model !== "string") {
      throw invalid("'model' must be a configured model", "model");
    }
    const runtime = models.require(body.model);
    const kv = runtime.config.kv;
    if (kv.store !== "mooncake" || !kv.url) {
      throw new HttpError(400, `Model '${runtime.config.name}' has no KV store configured`, {
        code: "no_kv_store",
      });
    }
    const prompts = await promptsOf(runtime, body);
    const result = await detectForRuntime(runtime, prompts);
    if (!result.asked) {
      throw new HttpError(502, `The KV store could not be asked: ${result.error}`, {
        code: "kv_store_unreachable",
      });
    }
    const { asked: _asked, ...found } = result;
    const best = result.schemes[0];
    return c.json({
      model: runtime.config.name,
      prompts: prompts.map((p) => p.length),
      ...found,
      kvBlock: best ? kvBlockText(best, { url: kv.url, modelName: runtime.config.name }) : null,
    });
  });
  return app;
}

/** The prompts to detect with: exactly one input form, tokenized by the model's tokenizer. */
async function promptsOf(
  runtime: ModelRuntime,
  body: DetectBody,
): Promise<(readonly number[])[]> {
  const given = (["tokens", "prompt", "messages", "recent"] as const)
    .filter((name) => body[name] !== undefined);
  if (given.length !== 1) throw invalid(`Give exactly one input: ${SHAPE}`, given[1] ?? "tokens");
  const { tokens, prompt, messages, recent } = body;
  if (recent !== undefined) return recentPrompts(runtime, recent);
  if (tokens !== undefined) {
    if (!Array.isArray(tokens) || !tokens.every((t) => Number.isInteger(t) && t >= 0)) {
      throw invalid("'tokens' must be an array of non-negative integers", "tokens");
    }
    return [tokens];
  }
  try {
    if (typeof prompt === "string") {
      return [await runtime.tokenizer.encode(prompt, { addSpecialTokens: true })];
    }
    if (!Array.isArray(messages)) throw invalid("'messages' must be an array", "messages");
    const kwargs = body.chat_template_kwargs as Record<string, unknown> | undefined;
    return [
      await runtime.tokenizer.encodeChat(messages as ChatMessage[], { chatTemplateKwargs: kwargs }),
    ];
  } catch (error) {
    if (error instanceof HttpError) throw error;
    throw invalid(`The prompt could not be tokenized: ${(error as Error).message}`, "prompt");
  }
}

function recentPrompts(runtime: ModelRuntime, recent: unknown): (readonly number[])[] {
  if (!Number.isInteger(recent) || (recent as number) < 1 || (recent as number) > MAX_RECENT) {
    throw invalid(`'recent' must be an integer from 1 to ${MAX_RECENT}`, "recent");
  }
  const prompts = runtime.recentPrompts.latest(recent as number);
  if (prompts.length === 0) {
    throw new HttpError(400, `No prompt of '${runtime.config.name}' was dispatched yet`, {
      param: "recent",
      code: "no_recent_prompts",
    });
  }
  return prompts;
}

function invalid(message: string, param: string): HttpError {
  return new HttpError(400, message, { param, code: "invalid_value" });
}

/// <reference lib="deno.worker" />
/**
 * A Deno Worker that loads one tokenizer and encodes prompts for the main loop
 * (tokenizer_worker_pool.ts). Its segment cache is its own: the pool sends a conversation's
 * turns to the same worker so they keep hitting it.
 */
import { TokenizeInputError } from "./errors.ts";
import { loadTokenizer } from "./load_tokenizer.ts";
import type { LoadedTokenizer } from "./local_tokenizer.ts";
import type { EncodeJob, FromWorker, ToWorker, WorkerFailure } from "./worker_protocol.ts";

let tokenizer: LoadedTokenizer | undefined;

function post(message: FromWorker, transfer: Transferable[] = []): void {
  self.postMessage(message, transfer);
}

function encode(job: EncodeJob): number[] {
  if (!tokenizer) throw new Error("the worker's tokenizer is not loaded yet");
  return job.kind === "text"
    ? tokenizer.encode(job.text, job.options)
    : tokenizer.encodeChat(job.messages, job.options);
}

function failureOf(error: unknown): WorkerFailure {
  const err = error instanceof Error ? error : new Error(String(error));
  return {
    kind: err instanceof TokenizeInputError ? "input" : "internal",
    name: err.name,
    message: err.message,
  };
}

self.onmessage = async (event: MessageEvent<ToWorker>) => {
  const message = event.data;
  if (message.type === "load") {
    try {
      tokenizer = await loadTokenizer(message.spec.dir, message.spec);
      post({ type: "loaded" });
    } catch (error) {
      post({ type: "load_failed", message: (error as Error).message });
    }
    return;
  }
  try {
    const ids = Uint32Array.from(encode(message.job));
    post({ type: "encoded", id: message.id, ids }, [ids.buffer]);
  } catch (error) {
    post({ type: "failed", id: message.id, failure: failureOf(error) });
  }
};

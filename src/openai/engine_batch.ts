/**
 * How many sequences an engine makes of one request body: each prompt of a batch (`prompt`,
 * `text` or `input_ids` as a list of prompts) times the samples asked per prompt (`n`, or
 * `sampling_params.n` on SGLang's /generate). SGLang normalizes such a request into a batch of
 * that many items (GenerateReqInput.normalize_batch_and_arguments, sglang io_struct.py) and
 * indexes its per-item fields, bootstrap rooms included, by item. Pure.
 */

/** The body's sequences when the engine takes it as a batch; undefined when it is one request. */
export function engineBatchSize(body: Record<string, unknown>): number | undefined {
  const prompts = promptCount(body);
  const samples = samplesPerPrompt(body);
  if (prompts === undefined && samples === 1) return undefined;
  return (prompts ?? 1) * samples;
}

/** Sequences the engine decodes for the body: at least one. */
export function sequencesOf(body: Record<string, unknown>): number {
  return engineBatchSize(body) ?? 1;
}

/** The number of prompts of a batch prompt; undefined for a single prompt. */
function promptCount(body: Record<string, unknown>): number | undefined {
  for (const field of ["prompt", "text", "input_ids"]) {
    const value = body[field];
    if (!Array.isArray(value) || value.length === 0) continue;
    const first = value[0];
    return typeof first === "string" || Array.isArray(first) ? value.length : undefined;
  }
  return undefined;
}

function samplesPerPrompt(body: Record<string, unknown>): number {
  const params = body.sampling_params;
  const sglang = Array.isArray(params) ? params[0] : params;
  const n = body.n ?? (sglang as { n?: unknown } | null | undefined)?.n;
  return Number.isInteger(n) && (n as number) > 1 ? n as number : 1;
}

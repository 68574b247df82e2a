/**
 * The special tokens `encode(text, add_special_tokens=true)` wraps around a text's ids (BOS for
 * Llama 3, nothing for Qwen), read from the tokenizer's post-processor. Transformers' Llama-family
 * fast tokenizers rebuild that post-processor from `add_bos_token` / `add_eos_token` in
 * tokenizer_config.json when they load (DeepSeek-V3 relies on this), so those classes follow the
 * config instead of tokenizer.json.
 */

export interface SpecialTokenFrame {
  prefix: number[];
  suffix: number[];
  /** Where the frame came from, for `tokenizer.info`. */
  source: string;
}

export type SpecialTokenFrameResult = { ok: true; frame: SpecialTokenFrame } | {
  ok: false;
  reason: string;
};

/** Classes whose transformers implementation calls `update_post_processor()` at load. */
const CONFIG_DRIVEN_CLASSES = new Set([
  "LlamaTokenizer",
  "LlamaTokenizerFast",
  "CodeLlamaTokenizer",
  "CodeLlamaTokenizerFast",
  "GemmaTokenizer",
  "GemmaTokenizerFast",
  "CohereTokenizerFast",
]);

type Json = Record<string, unknown>;

/** A special token's text in tokenizer_config.json: a string or an AddedToken `{content}`. */
export function tokenText(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (value && typeof value === "object" && typeof (value as Json).content === "string") {
    return (value as Json).content as string;
  }
  return undefined;
}

function fromConfig(
  config: Json,
  tokenToId: (token: string) => number | undefined,
): SpecialTokenFrameResult {
  const addBos = config.add_bos_token === undefined ? true : config.add_bos_token === true;
  const addEos = config.add_eos_token === true;
  const prefix: number[] = [];
  const suffix: number[] = [];
  for (
    const [wanted, key, into] of [[addBos, "bos_token", prefix], [
      addEos,
      "eos_token",
      suffix,
    ]] as const
  ) {
    if (!wanted) continue;
    const text = tokenText(config[key]);
    const id = text === undefined ? undefined : tokenToId(text);
    if (id === undefined) {
      return {
        ok: false,
        reason: `${key} is required by add_${key} but is missing from the vocabulary`,
      };
    }
    into.push(id);
  }
  return {
    ok: true,
    frame: {
      prefix,
      suffix,
      source: `tokenizer_config.json add_bos_token/add_eos_token (${config.tokenizer_class})`,
    },
  };
}

function applyProcessor(processor: Json, frame: SpecialTokenFrame): SpecialTokenFrameResult {
  switch (processor.type) {
    case "ByteLevel":
      return { ok: true, frame }; // offsets only
    case "TemplateProcessing":
      return applyTemplateProcessing(processor, frame);
    case "RobertaProcessing":
    case "BertProcessing": {
      const cls = processor.cls as [string, number] | undefined;
      const sep = processor.sep as [string, number] | undefined;
      if (!cls || !sep) return { ok: false, reason: `${processor.type} without cls/sep` };
      return {
        ok: true,
        frame: {
          prefix: [cls[1], ...frame.prefix],
          suffix: [...frame.suffix, sep[1]],
          source: frame.source,
        },
      };
    }
    case "Sequence": {
      let current: SpecialTokenFrameResult = { ok: true, frame };
      for (const inner of (processor.processors ?? []) as Json[]) {
        if (!current.ok) break;
        current = applyProcessor(inner, current.frame);
      }
      return current;
    }
    default:
      return { ok: false, reason: `post-processor ${String(processor.type)} is not supported` };
  }
}

/** TemplateProcessing's `single`: the special tokens before and after sequence A. */
function applyTemplateProcessing(
  processor: Json,
  frame: SpecialTokenFrame,
): SpecialTokenFrameResult {
  const single = processor.single as Json[] | undefined;
  const specials = (processor.special_tokens ?? {}) as Record<string, { ids?: number[] }>;
  if (!Array.isArray(single)) {
    return { ok: false, reason: "TemplateProcessing without `single`" };
  }
  const prefix: number[] = [];
  const suffix: number[] = [];
  let seen = false;
  for (const item of single) {
    if (item.Sequence) {
      if ((item.Sequence as Json).id !== "A" || seen) {
        return { ok: false, reason: "TemplateProcessing `single` must hold sequence A once" };
      }
      seen = true;
      continue;
    }
    const name = (item.SpecialToken as Json | undefined)?.id;
    const ids = typeof name === "string" ? specials[name]?.ids : undefined;
    if (!Array.isArray(ids)) {
      return {
        ok: false,
        reason: `TemplateProcessing special token ${String(name)} has no ids`,
      };
    }
    (seen ? suffix : prefix).push(...ids);
  }
  if (!seen) return { ok: false, reason: "TemplateProcessing `single` lacks sequence A" };
  return {
    ok: true,
    frame: {
      prefix: [...prefix, ...frame.prefix],
      suffix: [...frame.suffix, ...suffix],
      source: frame.source,
    },
  };
}

/** Resolves the special-token frame, or says why it cannot be reproduced outside the library. */
export function resolveSpecialTokenFrame(
  tokenizerJson: Json,
  tokenizerConfig: Json,
  tokenToId: (token: string) => number | undefined,
): SpecialTokenFrameResult {
  const cls = tokenizerConfig.tokenizer_class;
  if (typeof cls === "string" && CONFIG_DRIVEN_CLASSES.has(cls)) {
    return fromConfig(tokenizerConfig, tokenToId);
  }
  const processor = tokenizerJson.post_processor as Json | null | undefined;
  const empty: SpecialTokenFrame = {
    prefix: [],
    suffix: [],
    source: "tokenizer.json post_processor",
  };
  if (!processor) return { ok: true, frame: { ...empty, source: "no post_processor" } };
  return applyProcessor(processor, empty);
}

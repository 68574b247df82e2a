/**
 * Renders a model's chat template the way transformers' `apply_chat_template(tokenize=False)` does
 * inside vLLM/SGLang: the template chosen by name (`default`, or `tool_use` when tools are given),
 * the special tokens from tokenizer_config.json, the request's chat_template_kwargs, and the helpers
 * transformers provides (`raise_exception`, `strftime_now`).
 */
import { Environment, Interpreter, Template } from "@huggingface/jinja";
import {
  type ChatFlavor,
  type ContentFormat,
  prepareMessages,
  prepareTools,
} from "./chat_messages.ts";
import { ChatTemplateError } from "./errors.ts";
import { strftime } from "./strftime.ts";
import type { ChatEncodeOptions, ChatMessage } from "./types.ts";

type Json = Record<string, unknown>;

/** The template sources a tokenizer directory provides, by name (`default` for a single one). */
export type ChatTemplateSources = Map<string, string>;

/**
 * Collects the templates: `chat_template.jinja` (newer repos) wins over tokenizer_config.json's
 * `chat_template`, which is a string or a list of `{name, template}`.
 */
export function chatTemplateSources(
  tokenizerConfig: Json,
  jinjaFile: string | undefined,
): { ok: true; sources: ChatTemplateSources } | { ok: false; reason: string } {
  const sources: ChatTemplateSources = new Map();
  const raw = tokenizerConfig.chat_template;
  if (typeof raw === "string") sources.set("default", raw);
  else if (Array.isArray(raw)) {
    for (const item of raw) {
      const name = (item as Json)?.name;
      const template = (item as Json)?.template;
      if (typeof name !== "string" || typeof template !== "string") {
        return { ok: false, reason: "chat_template list items must be {name, template} strings" };
      }
      sources.set(name, template);
    }
  } else if (raw !== undefined && raw !== null) {
    return { ok: false, reason: "chat_template must be a string or a list of {name, template}" };
  }
  if (jinjaFile !== undefined) sources.set("default", jinjaFile);
  return { ok: true, sources };
}

// --- content format detection (vLLM `_detect_content_format`): does the template loop over
// `message['content']` for some `message` iterated from `messages`? -----------------------------

interface Node {
  type: string;
  [key: string]: unknown;
}

function isNode(value: unknown): value is Node {
  return value !== null && typeof value === "object" && typeof (value as Node).type === "string";
}

function* walk(node: unknown): Generator<Node> {
  if (Array.isArray(node)) {
    for (const item of node) yield* walk(item);
    return;
  }
  if (!isNode(node)) return;
  yield node;
  for (const [key, value] of Object.entries(node)) {
    if (key !== "type" && value && typeof value === "object") yield* walk(value);
  }
}

function isVar(node: unknown, name: string): boolean {
  return isNode(node) && node.type === "Identifier" && node.value === name;
}

function isAttr(node: unknown, name: string, key: string): boolean {
  if (!isNode(node) || node.type !== "MemberExpression" || !isVar(node.object, name)) return false;
  const property = node.property as Node;
  return node.computed
    ? property?.type === "StringLiteral" && property.value === key
    : property?.type === "Identifier" && property.value === key;
}

/** `name`, `name[key]`/`name.key`, through filters, tests and slices (`messages[1:]`). */
function accesses(node: unknown, name: string, key?: string): boolean {
  if (!isNode(node)) return false;
  if (node.type === "FilterExpression" || node.type === "TestExpression") {
    return accesses(node.operand, name, key);
  }
  if (
    node.type === "MemberExpression" && isNode(node.property) &&
    node.property.type === "SliceExpression"
  ) {
    return accesses(node.object, name, key);
  }
  return key === undefined ? isVar(node, name) : isAttr(node, name, key);
}

function detectContentFormat(template: Template): ContentFormat {
  const nodes = [...walk(template.parsed)];
  // Variables holding the messages: `messages` and anything assigned from it (`loop_messages`).
  const messageLists = ["messages"];
  for (let i = 0; i < messageLists.length; i++) {
    for (const node of nodes) {
      if (node.type === "Set" && accesses(node.value, messageLists[i]) && isNode(node.assignee)) {
        const target = node.assignee.value;
        if (
          node.assignee.type === "Identifier" && typeof target === "string" &&
          !messageLists.includes(target)
        ) {
          messageLists.push(target);
        }
      }
    }
  }
  const messageVars = new Set<string>();
  for (const node of nodes) {
    if (node.type === "For" && messageLists.some((v) => accesses(node.iterable, v))) {
      const loopvar = node.loopvar as Node;
      if (loopvar?.type === "Identifier") messageVars.add(loopvar.value as string);
    }
  }
  for (const node of nodes) {
    if (
      node.type === "For" && [...messageVars].some((v) => accesses(node.iterable, v, "content"))
    ) {
      return "openai";
    }
  }
  return "string";
}

// --- Python's str.strip(chars): @huggingface/jinja ignores the argument -------------------------

const STRIPS = new Set(["strip", "lstrip", "rstrip"]);

/**
 * Rewrites `s.strip(chars)` / `lstrip` / `rstrip` calls that pass characters into calls of the
 * `__py_<name>` globals (pythonStrip), because the library trims whitespace whatever it is given:
 * Qwen3's template keeps the space in `content.split('</think>')[-1].lstrip('\n')`, and the
 * library drops it (tests/real/vllm_tokens_test.ts found it against vLLM).
 */
function usePythonStrips(parsed: unknown): void {
  for (const node of walk(parsed)) {
    if (node.type !== "CallExpression") continue;
    const callee = node.callee as Node;
    const args = node.args as unknown[];
    if (callee?.type !== "MemberExpression" || callee.computed || args.length === 0) continue;
    const property = callee.property as Node;
    if (property.type !== "Identifier" || !STRIPS.has(property.value as string)) continue;
    property.value = `__py_${property.value}`;
    node.callee = property;
    node.args = [callee.object, ...args];
  }
}

/** Python's `str.strip(chars)` family: `chars` null or absent means whitespace. */
export function pythonStrip(
  text: unknown,
  chars: unknown,
  side: "both" | "left" | "right",
): string {
  if (typeof text !== "string") throw new Error(`strip() needs a string, got ${typeof text}`);
  if (chars === undefined || chars === null) {
    return side === "left" ? text.trimStart() : side === "right" ? text.trimEnd() : text.trim();
  }
  const set = new Set(String(chars));
  let start = 0;
  let end = text.length;
  if (side !== "right") { while (start < end && set.has(text[start])) start++; }
  if (side !== "left") { while (end > start && set.has(text[end - 1])) end--; }
  return text.slice(start, end);
}

const STRIP_GLOBALS: [string, unknown][] = [
  ["__py_strip", (text: unknown, chars?: unknown) => pythonStrip(text, chars, "both")],
  ["__py_lstrip", (text: unknown, chars?: unknown) => pythonStrip(text, chars, "left")],
  ["__py_rstrip", (text: unknown, chars?: unknown) => pythonStrip(text, chars, "right")],
];

// --- rendering ------------------------------------------------------------------------------------

export interface ChatTemplateRendererOptions {
  sources: ChatTemplateSources;
  /** bos_token, eos_token, ... as strings (transformers' `special_tokens_map`). */
  specialTokens: Record<string, unknown>;
  flavor: ChatFlavor;
  /** "auto" detects it from the template, as vLLM does. */
  contentFormat: ContentFormat | "auto";
  /** The clock behind `strftime_now`. */
  clock: () => Date;
}

interface CompiledTemplate {
  name: string;
  template: Template;
  contentFormat: ContentFormat;
}

/** Python's `range`, which Jinja templates use (the library's own is not exported). */
function range(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) [start, stop] = [0, start];
  if (step === 0) throw new Error("range() arg 3 must not be zero");
  const out: number[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
  return out;
}

/** Jinja globals as transformers' environment has them. */
const GLOBALS: [string, unknown][] = [
  ...STRIP_GLOBALS,
  ["false", false],
  ["true", true],
  ["none", null],
  ["False", false],
  ["True", true],
  ["None", null],
  ["range", range],
];

/** Keys the renderer sets itself; request kwargs may not replace them. */
const RESERVED = new Set([
  "messages",
  "tools",
  "documents",
  "add_generation_prompt",
  "raise_exception",
  "strftime_now",
]);

export class ChatTemplateRenderer {
  readonly #compiled = new Map<string, CompiledTemplate>();
  readonly #options: ChatTemplateRendererOptions;

  constructor(options: ChatTemplateRendererOptions) {
    this.#options = options;
    for (const [name, source] of options.sources) {
      let template: Template;
      try {
        template = new Template(source);
      } catch (error) {
        throw new ChatTemplateError(
          `Chat template '${name}' does not parse: ${(error as Error).message}`,
          {
            cause: error,
          },
        );
      }
      usePythonStrips(template.parsed);
      const contentFormat = options.contentFormat === "auto"
        ? detectContentFormat(template)
        : options.contentFormat;
      this.#compiled.set(name, { name, template, contentFormat });
    }
  }

  get templateNames(): string[] {
    return [...this.#compiled.keys()];
  }

  /** transformers' choice: `tool_use` when tools are given and it exists, else `default`. */
  #select(tools: unknown[] | undefined): CompiledTemplate {
    if (this.#compiled.size === 0) {
      throw new ChatTemplateError(
        "This model's tokenizer has no chat template; send a completions request (prompt) instead.",
      );
    }
    if (tools !== undefined && tools !== null && this.#compiled.has("tool_use")) {
      return this.#compiled.get("tool_use")!;
    }
    const chosen = this.#compiled.get("default") ??
      (this.#compiled.size === 1 ? [...this.#compiled.values()][0] : undefined);
    if (!chosen) {
      throw new ChatTemplateError(
        `This model has several chat templates (${
          this.templateNames.join(", ")
        }) and none named default`,
      );
    }
    return chosen;
  }

  contentFormat(tools?: unknown[]): ContentFormat {
    return this.#select(tools).contentFormat;
  }

  /** `Template.render` with transformers' helpers in place of the library's own globals. */
  #run(template: Template, context: Record<string, unknown>): string {
    const env = new Environment();
    for (const [name, value] of GLOBALS) env.set(name, value);
    env.set("raise_exception", (message: unknown) => {
      throw new ChatTemplateError(`Chat template rejected the conversation: ${String(message)}`);
    });
    env.set("strftime_now", (format: unknown) => strftime(this.#options.clock(), String(format)));
    for (const [key, value] of Object.entries(context)) env.set(key, value);
    const result = new Interpreter(env).run(template.parsed) as { value: unknown };
    return String(result.value);
  }

  render(messages: ChatMessage[], options: ChatEncodeOptions = {}): string {
    const compiled = this.#select(options.tools);
    const context: Record<string, unknown> = { ...this.#options.specialTokens };
    for (const [key, value] of Object.entries(options.chatTemplateKwargs ?? {})) {
      if (!RESERVED.has(key)) context[key] = value;
    }
    context.messages = prepareMessages(messages, this.#options.flavor, compiled.contentFormat);
    context.tools = prepareTools(options.tools, this.#options.flavor);
    context.documents = options.documents ?? null;
    context.add_generation_prompt = options.addGenerationPrompt ?? true;
    try {
      return this.#run(compiled.template, context);
    } catch (error) {
      if (error instanceof ChatTemplateError) throw error;
      throw new ChatTemplateError(
        `Chat template '${compiled.name}' failed on this conversation: ${(error as Error).message}`,
        { cause: error },
      );
    }
  }
}

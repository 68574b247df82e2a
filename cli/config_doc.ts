/**
 * `deno task docs:config`: writes docs/configuration.md from the config schema
 * (src/config/config_doc.ts), formatted by `deno fmt` as the repository formats Markdown.
 * `--check` writes nothing and exits 1 when the file is stale.
 */
import { fileURLToPath } from "node:url";
import { parseCommandArgs } from "./args.ts";
import { configurationMarkdown, SCHEMA_SOURCES } from "../src/config/config_doc.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
export const CONFIG_DOC = "docs/configuration.md";

const USAGE = `Usage: deno task docs:config [--check]

Writes ${CONFIG_DOC} from the config schema (src/config/schema.ts, src/config/model_schema.ts)
and the scheduling registry. --check writes nothing: exit 0 when the file is current, 1 when it
is stale.`;

/** docs/configuration.md as the schema writes it today, formatted. */
export async function generatedConfigDoc(): Promise<string> {
  const sources = await Promise.all(
    SCHEMA_SOURCES.map(async (path) => ({ path, text: await Deno.readTextFile(ROOT + path) })),
  );
  return await formatMarkdown(configurationMarkdown(sources));
}

/** Markdown through `deno fmt`, with the repository's settings (deno.json). */
async function formatMarkdown(text: string): Promise<string> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["fmt", "--ext", "md", "-"],
    cwd: ROOT,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(text));
  await writer.close();
  const output = await child.output();
  if (!output.success) {
    throw new Error(`deno fmt failed: ${new TextDecoder().decode(output.stderr)}`);
  }
  return new TextDecoder().decode(output.stdout);
}

export async function runConfigDoc(args: string[]): Promise<number> {
  const parsed = parseCommandArgs(args, { check: { type: "boolean", default: false } }, USAGE);
  if (parsed.exit !== undefined) return parsed.exit;
  const fresh = await generatedConfigDoc();
  const current = await Deno.readTextFile(ROOT + CONFIG_DOC).catch(() => "");
  if (parsed.values.check) {
    if (fresh === current) return 0;
    console.error(`${CONFIG_DOC} is stale: run \`deno task docs:config\`.`);
    return 1;
  }
  if (fresh !== current) await Deno.writeTextFile(ROOT + CONFIG_DOC, fresh);
  console.log(`${CONFIG_DOC}: ${fresh === current ? "already current" : "written"}.`);
  return 0;
}

if (import.meta.main) Deno.exit(await runConfigDoc(Deno.args));

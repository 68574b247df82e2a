/**
 * docs/configuration.md is what the config schema writes today: regenerated in memory and
 * compared, so a field added, removed, re-typed or re-described without `deno task docs:config`
 * fails here (and so in CI).
 */
import { assert, assertEquals } from "../assert.ts";
import { CONFIG_DOC, generatedConfigDoc } from "../../cli/config_doc.ts";
import { anchor, configurationMarkdown, SCHEMA_SOURCES } from "../../src/config/config_doc.ts";
import { resolveConfig } from "../../src/config/load.ts";

const ROOT = new URL("../../", import.meta.url);

Deno.test("docs/configuration.md is current: run `deno task docs:config` when this fails", async () => {
  const committed = await Deno.readTextFile(new URL(CONFIG_DOC, ROOT));
  const fresh = await generatedConfigDoc();
  if (committed !== fresh) {
    const a = committed.split("\n");
    const b = fresh.split("\n");
    const line = a.findIndex((text, i) => text !== b[i]);
    throw new Error(
      `${CONFIG_DOC} is stale: run \`deno task docs:config\` and commit it.\n` +
        `First difference at line ${line + 1}:\n  committed: ${a[line]}\n  schema:    ${b[line]}`,
    );
  }
});

async function sources() {
  return await Promise.all(
    SCHEMA_SOURCES.map(async (path) => ({
      path,
      text: await Deno.readTextFile(new URL(path, ROOT)),
    })),
  );
}

Deno.test("the configuration reference lists every field with its default and links only to its own headings", async () => {
  const text = configurationMarkdown(await sources());
  for (
    const row of [
      "| `port` | integer 0 to 65535 | `8080` |",
      "| `timeoutMs` | integer 1 to 60000 | `50` |",
      "| `models` | array of objects: [`models[]`](#models), at least 1 | **required** |",
    ]
  ) {
    assert(text.includes(row), `missing row ${row}`);
  }
  const headings = new Set(
    [...text.matchAll(/^#+ (.+)$/gm)].map((m) => anchor(m[1])),
  );
  const local = [...text.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]);
  assertEquals(local.filter((a) => !headings.has(a)), [], "links to headings that exist");
});

Deno.test("a field's doc comment in the schema's source becomes its description, and only one is kept", async () => {
  const [schema, model] = await sources();
  const scheme = '  scheme: z.enum(["http", "https"]).default("http"),';
  assert(model.text.includes(scheme), "model_schema.ts declares discovery's scheme so");
  const described = {
    ...model,
    text: model.text.replace(scheme, `  /** How to reach the engines. */\n${scheme}`),
  };
  assert(
    configurationMarkdown([schema, described]).includes(
      '| `scheme` | one of `"http"`, `"https"` | `"http"` | How to reach the engines. |',
    ),
  );
  // A description the generator holds for a field the schema now describes is refused.
  const host = '    host: z.string().min(1).default("127.0.0.1"),';
  const edited = { ...schema, text: schema.text.replace(host, `    /** Where. */\n${host}`) };
  assert(edited.text !== schema.text, "the edit applies");
  let refused = "";
  try {
    configurationMarkdown([edited, model]);
  } catch (error) {
    refused = (error as Error).message;
  }
  assert(refused.includes("listen.host: the schema describes it already"), refused);
});

Deno.test("the example config in the reference is valid", async () => {
  const text = configurationMarkdown(await sources());
  const example = /```json\n([\s\S]*?)```/.exec(text)![1];
  const config = resolveConfig(JSON.parse(example), { env: () => "token" });
  assertEquals(config.models[0].kv.url, "http://127.0.0.1:9003");
});

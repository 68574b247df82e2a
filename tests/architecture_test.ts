/**
 * The import table of docs/architecture.md ("What may import what"), checked on every relative
 * import of the source tree, so a dependency pointing the wrong way fails here, not in a review.
 */
import { assertEquals } from "./assert.ts";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const CORE = ["src/hashing/", "src/scheduling/", "src/kv/", "src/tokenize/", "src/proxy/"];

/** Folder (or file) prefix → prefixes it may import; the longest matching prefix applies. */
const MAY_IMPORT: Record<string, string[]> = {
  "mod.ts": ["cli/", "routes/app.ts", "src/"],
  "cli/": ["cli/", "routes/app.ts", "src/", "tests/fakes/"],
  "routes/": ["routes/", "src/"],
  "src/gateway/": [
    "src/gateway/",
    "src/contracts.ts",
    "src/telemetry/",
    "src/config/",
    "src/cluster/",
    "src/openai/",
    "src/experiment/",
    ...CORE,
  ],
  "src/telemetry/": [
    "src/telemetry/",
    "src/contracts.ts",
    "src/config/",
    "src/cluster/",
    "src/openai/",
    "src/experiment/",
    ...CORE,
  ],
  "src/experiment/": [
    "src/experiment/",
    "src/contracts.ts",
    "src/config/",
    "src/cluster/",
    "src/openai/",
    ...CORE,
  ],
  "src/sim/": [
    "src/sim/",
    "src/scheduling/",
    "src/kv/prefix.ts",
    "src/kv/types.ts",
    "src/cluster/load_account.ts",
    "src/cluster/decode_outlook.ts",
    "src/experiment/",
    "src/config/",
    "src/contracts.ts",
  ],
  "src/contracts.ts": ["src/config/", "src/cluster/", "src/openai/", "src/experiment/", ...CORE],
  "src/admin/": ["src/admin/", "src/openai/errors.ts"],
  "src/dashboard/": ["src/dashboard/", "src/admin/", "src/openai/errors.ts"],
  "src/cluster/": ["src/cluster/", "src/config/", "src/scheduling/"],
  "src/openai/": ["src/openai/", "src/config/", "src/tokenize/types.ts"],
  "src/config/": ["src/config/", "src/hashing/", "src/scheduling/"],
  ...Object.fromEntries(CORE.map((folder) => [folder, [folder]])),
};

function* sourceFiles(dir: string): Generator<string> {
  for (const entry of Deno.readDirSync(join(ROOT, dir))) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) yield* sourceFiles(path);
    else if (/\.tsx?$/.test(entry.name)) yield path;
  }
}

function relativeImports(file: string): string[] {
  const text = Deno.readTextFileSync(join(ROOT, file));
  const specifiers = [...text.matchAll(/(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)]
    .map((m) => m[1]);
  return specifiers.map((s) => relative(ROOT, resolve(ROOT, dirname(file), s)));
}

function rulesFor(file: string): string[] | undefined {
  const owner = Object.keys(MAY_IMPORT).filter((p) => file === p || file.startsWith(p))
    .sort((a, b) => b.length - a.length)[0];
  return owner === undefined ? undefined : MAY_IMPORT[owner];
}

Deno.test("every import follows docs/architecture.md's table (dependencies point one way)", () => {
  const wrong: string[] = [];
  for (
    const file of ["mod.ts", ...sourceFiles("cli"), ...sourceFiles("routes"), ...sourceFiles("src")]
  ) {
    const allowed = rulesFor(file);
    if (allowed === undefined) {
      wrong.push(`${file}: not in the table`);
      continue;
    }
    for (const target of relativeImports(file)) {
      if (!allowed.some((p) => target === p || target.startsWith(p))) {
        wrong.push(`${file} imports ${target}`);
      }
    }
  }
  assertEquals(wrong, []);
});

Deno.test("the check catches an import that points the wrong way", () => {
  const allowed = rulesFor("src/scheduling/registry.ts")!;
  assertEquals(allowed.some((p) => "src/gateway/gateway.ts".startsWith(p)), false);
  assertEquals(
    rulesFor("src/gateway/gateway.ts")!.some((p) => "routes/app.ts".startsWith(p)),
    false,
  );
});

Deno.test("the pure core does no I/O: no Deno APIs, fetch, timers or telemetry in hashing and scheduling", () => {
  const io =
    /\bDeno\.|\bfetch\(|\bset(Timeout|Interval)\(|performance\.now|Date\.now|Math\.random|@opentelemetry|prom-client/;
  const found = [...sourceFiles("src/hashing"), ...sourceFiles("src/scheduling")].flatMap((file) =>
    Deno.readTextFileSync(join(ROOT, file)).split("\n")
      .filter((line) => !/^\s*(\*|\/\/)/.test(line) && io.test(line))
      .map((line) => `${file}: ${line.trim()}`)
  );
  assertEquals(found, []);
});

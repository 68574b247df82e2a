/**
 * The import table ("What may import what"), checked on every relative import of the source tree,
 * so a dependency pointing the wrong way fails here, not in a review. This file holds the only
 * copy: docs/architecture.md quotes it (`deno run -A tests/architecture_test.ts --write-doc`
 * rewrites the quote; a test fails when it is stale). Import circles between files fail too.
 */
import { assertEquals } from "./assert.ts";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const CORE = ["src/hashing/", "src/scheduling/", "src/kv/", "src/tokenize/", "src/proxy/"];

/** Folder (or file) prefix → prefixes it may import; the longest matching prefix applies. */
export const MAY_IMPORT: Record<string, string[]> = {
  "mod.ts": ["routes/app.ts", "src/"],
  "cli/": ["cli/", "routes/app.ts", "src/"],
  "routes/": ["routes/", "src/"],
  "src/gateway/": [
    "src/gateway/",
    "src/runtime/",
    "src/contracts.ts",
    "src/telemetry/",
    "src/config/",
    "src/cluster/",
    "src/openai/",
    "src/experiment/",
    ...CORE,
  ],
  "src/runtime/": [
    "src/runtime/",
    "src/contracts.ts",
    "src/telemetry/",
    "src/config/",
    "src/cluster/",
    "src/openai/",
    ...CORE,
  ],
  "src/diagnostics/": [
    "src/diagnostics/",
    "src/runtime/",
    "src/telemetry/",
    "src/config/",
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
  "src/fakes/": ["src/fakes/", "src/hashing/", "src/scheduling/", "src/tokenize/"],
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

Deno.test("every import follows the import table (dependencies point one way)", () => {
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

/** The import graph of the source tree: file → the files it imports. */
function importGraph(): Map<string, string[]> {
  const files = ["mod.ts", ...sourceFiles("cli"), ...sourceFiles("routes"), ...sourceFiles("src")];
  return new Map(files.map((file) => [file, relativeImports(file)]));
}

/** Every import circle (a strongly connected set of two or more files, or a self-import). */
export function importCircles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (file: string) => {
    index.set(file, next);
    low.set(file, next++);
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) low.set(file, Math.min(low.get(file)!, index.get(target)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const members: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      members.push(member);
    } while (member !== file);
    if (members.length > 1 || (graph.get(file) ?? []).includes(file)) circles.push(members.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return circles;
}

Deno.test("no import circle between the source tree's files", () => {
  assertEquals(importCircles(importGraph()), []);
});

Deno.test("the circle check finds a circle of three files and a self-import", () => {
  const graph = new Map([
    ["a.ts", ["b.ts"]],
    ["b.ts", ["c.ts"]],
    ["c.ts", ["a.ts", "d.ts"]],
    ["d.ts", []],
    ["e.ts", ["e.ts"]],
  ]);
  assertEquals(importCircles(graph), [["a.ts", "b.ts", "c.ts"], ["e.ts"]]);
});

const TABLE_START = "<!-- import-table: written by tests/architecture_test.ts -->";
const TABLE_END = "<!-- import-table end -->";

/** MAY_IMPORT as the Markdown table docs/architecture.md shows. */
export function importTableMarkdown(): string {
  const rows = Object.entries(MAY_IMPORT).map(([owner, allowed]) =>
    `| \`${owner}\` | ${allowed.map((p) => `\`${p}\``).join(", ")} |`
  );
  return ["| folder or file | may import |", "| --- | --- |", ...rows].join("\n");
}

function quotedTable(doc: string): string | undefined {
  const start = doc.indexOf(TABLE_START);
  const end = doc.indexOf(TABLE_END);
  if (start < 0 || end < start) return undefined;
  return doc.slice(start + TABLE_START.length, end).trim();
}

const DOC = join(ROOT, "docs/architecture.md");

Deno.test("docs/architecture.md quotes this file's import table, current", async () => {
  const doc = Deno.readTextFileSync(DOC);
  const expected = await formatted(importTableMarkdown());
  assertEquals(
    quotedTable(doc),
    expected,
    "run: deno run -A tests/architecture_test.ts --write-doc",
  );
});

/** The table as `deno fmt` lays it out (the doc is kept formatted). */
async function formatted(markdown: string): Promise<string> {
  const command = new Deno.Command(Deno.execPath(), {
    args: ["fmt", "--ext", "md", "-"],
    stdin: "piped",
    stdout: "piped",
  }).spawn();
  const writer = command.stdin.getWriter();
  await writer.write(new TextEncoder().encode(markdown + "\n"));
  await writer.close();
  const { stdout } = await command.output();
  return new TextDecoder().decode(stdout).trim();
}

if (import.meta.main && Deno.args.includes("--write-doc")) {
  const doc = Deno.readTextFileSync(DOC);
  const start = doc.indexOf(TABLE_START);
  const end = doc.indexOf(TABLE_END);
  const table = await formatted(importTableMarkdown());
  Deno.writeTextFileSync(
    DOC,
    `${doc.slice(0, start + TABLE_START.length)}\n\n${table}\n\n${doc.slice(end)}`,
  );
}

/**
 * The README and docs/*.md hold together: every relative link reaches a file that exists and, with
 * a `#fragment`, a heading of that file; each table of contents lists exactly its file's sections;
 * every repository path they name in code (`tests/...`, `src/...`) exists, so a rename that leaves
 * the docs behind fails here.
 */
import { assertEquals } from "../assert.ts";
import { anchor } from "../../src/config/config_doc.ts";
import { docFiles, fencedBlocks } from "./doc_blocks.ts";

const ROOT = new URL("../../", import.meta.url);

/** The Markdown outside fenced blocks (a `#` in a shell comment is no heading). */
function prose(markdown: string): string {
  const blocks = fencedBlocks("", markdown);
  let out = markdown;
  for (const block of blocks) out = out.replace(block.text, "");
  return out;
}

function headings(markdown: string): { level: number; text: string }[] {
  return [...prose(markdown).matchAll(/^(#{1,6}) (.+)$/gm)].map((m) => ({
    level: m[1].length,
    text: m[2].trim(),
  }));
}

function read(file: string): string {
  return Deno.readTextFileSync(new URL(file, ROOT));
}

Deno.test("every relative link of the README and docs reaches a file and a heading", () => {
  const broken: string[] = [];
  for (const file of docFiles(ROOT)) {
    const links = [...prose(read(file)).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]);
    for (const link of links) {
      if (/^[a-z]+:/.test(link)) continue;
      const [path, fragment] = link.split("#");
      const target = path === "" ? new URL(file, ROOT) : new URL(path, new URL(file, ROOT));
      let text: string;
      try {
        text = Deno.readTextFileSync(target);
      } catch {
        try {
          Deno.statSync(target);
        } catch {
          broken.push(`${file}: ${link} (no such file)`);
        }
        continue;
      }
      if (fragment && target.pathname.endsWith(".md")) {
        const anchors = new Set(headings(text).map((h) => anchor(h.text)));
        if (!anchors.has(fragment)) broken.push(`${file}: ${link} (no such heading)`);
      }
    }
  }
  assertEquals(broken, []);
});

Deno.test("each table of contents lists its file's sections, in order", () => {
  const wrong: string[] = [];
  for (const file of docFiles(ROOT)) {
    const text = read(file);
    const toc = /<!-- toc -->([\s\S]*?)<!-- tocstop -->/.exec(text);
    if (!toc) continue;
    const listed = [...toc[1].matchAll(/^- \[[^\]]+\]\(#([^)]+)\)/gm)].map((m) => m[1]);
    const sections = headings(text).filter((h) => h.level === 2).map((h) => anchor(h.text));
    if (JSON.stringify(listed) !== JSON.stringify(sections)) {
      wrong.push(`${file}: lists ${listed.join(", ")}; has ${sections.join(", ")}`);
    }
  }
  assertEquals(wrong, []);
});

/** Paths compat.md quotes from the upstream projects (vLLM, SGLang), not from this repository. */
const UPSTREAM_PATHS = new Set([
  "docs/advanced_features/pd_disaggregation.md",
  "docs/features/mooncake_connector_usage.md",
  "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py",
]);

Deno.test("every repository path the README and docs name in code exists", () => {
  const missing: string[] = [];
  for (const file of docFiles(ROOT)) {
    const paths = [...read(file).matchAll(/`((?:tests|src|deploy|cli|routes|docs)\/[\w./-]*)`/g)]
      .map((m) => m[1]);
    for (const path of new Set(paths)) {
      if (UPSTREAM_PATHS.has(path)) continue;
      try {
        Deno.statSync(new URL(path, ROOT));
      } catch {
        missing.push(`${file}: ${path}`);
      }
    }
  }
  assertEquals(missing, []);
});

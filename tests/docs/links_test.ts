/**
 * The README and docs/*.md hold together: every relative link reaches a file that exists and, with
 * a `#fragment`, a heading of that file; each table of contents lists exactly its file's sections.
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

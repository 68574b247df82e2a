/**
 * The code blocks of the README and docs/*.md, as a reader copies them: each shell command (a
 * line of a ```sh or ```bash block, continuation lines joined, comments dropped) with the file and
 * line it came from, and the other fenced blocks by language. Used by docs_commands_test.ts.
 */

/** A shell command of the docs. */
export interface DocCommand {
  file: string;
  line: number;
  text: string;
}

/** A fenced block of another language (ts, json, yaml, ...). */
export interface DocBlock {
  file: string;
  line: number;
  lang: string;
  text: string;
}

/** README.md and every docs/*.md (not the folders under docs/), relative to the root. */
export function docFiles(root: URL): string[] {
  const docs = [...Deno.readDirSync(new URL("docs/", root))]
    .filter((e) => e.isFile && e.name.endsWith(".md"))
    .map((e) => `docs/${e.name}`)
    .sort();
  return ["README.md", ...docs];
}

/** Every fenced block of a Markdown text, with the line its first content line is on. */
export function fencedBlocks(file: string, markdown: string): DocBlock[] {
  const blocks: DocBlock[] = [];
  const lines = markdown.split("\n");
  let open: { lang: string; line: number; indent: number; body: string[] } | undefined;
  lines.forEach((line, i) => {
    if (!open) {
      const fence = /^(\s*)```(\S*)\s*$/.exec(line);
      if (fence) open = { lang: fence[2], line: i + 2, indent: fence[1].length, body: [] };
      return;
    }
    if (/^\s*```\s*$/.test(line)) {
      blocks.push({ file, line: open.line, lang: open.lang, text: open.body.join("\n") });
      open = undefined;
      return;
    }
    open.body.push(line.slice(Math.min(open.indent, line.length - line.trimStart().length)));
  });
  return blocks;
}

/** The commands of the ```sh and ```bash blocks. */
export function shellCommands(blocks: DocBlock[]): DocCommand[] {
  const commands: DocCommand[] = [];
  for (const block of blocks.filter((b) => b.lang === "sh" || b.lang === "bash")) {
    const lines = block.text.split("\n");
    for (let i = 0; i < lines.length; i++) {
      const start = i;
      let text = lines[i];
      while (text.trimEnd().endsWith("\\") && i + 1 < lines.length) {
        text = text.trimEnd().slice(0, -1).trimEnd() + " " + lines[++i].trim();
      }
      text = stripComment(text).trim();
      if (text !== "") commands.push({ file: block.file, line: block.line + start, text });
    }
  }
  return commands;
}

/** A line without its `# comment` (a `#` that starts a word outside quotes). */
export function stripComment(line: string): string {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === "\\" && quote === '"') i++;
      else if (c === quote) quote = undefined;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === "#" && (i === 0 || /\s/.test(line[i - 1]))) return line.slice(0, i);
  }
  return line;
}

/** A word of a shell command, or an operator (`|`, `&&`, `;`, `>`, `&`, `<`). */
export type Word = { word: string } | { op: string };

/**
 * Splits a command as a POSIX shell would for the forms the docs use: single quotes (literal),
 * double quotes (with `$NAME` / `${NAME}` and `\"`), bare words (with `$NAME`), and operators.
 */
export function shellWords(text: string, env: (name: string) => string): Word[] {
  const words: Word[] = [];
  let current: string | undefined;
  const push = () => {
    if (current !== undefined) words.push({ word: current });
    current = undefined;
  };
  const variable = (from: number): [string, number] => {
    const braced = /^\$\{(\w+)\}/.exec(text.slice(from));
    const bare = /^\$(\w+)/.exec(text.slice(from));
    const match = braced ?? bare;
    if (!match) return ["$", from + 1];
    return [env(match[1]), from + match[0].length];
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) {
      push();
      i++;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unclosed ' in: ${text}`);
      current = (current ?? "") + text.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      current ??= "";
      i++;
      while (i < text.length && text[i] !== '"') {
        if (text[i] === "\\" && i + 1 < text.length) {
          current += text[i + 1];
          i += 2;
        } else if (text[i] === "$") {
          const [value, next] = variable(i);
          current += value;
          i = next;
        } else current += text[i++];
      }
      if (i >= text.length) throw new Error(`unclosed " in: ${text}`);
      i++;
    } else if (c === "$") {
      const [value, next] = variable(i);
      current = (current ?? "") + value;
      i = next;
    } else if (c === "\\" && i + 1 < text.length) {
      current = (current ?? "") + text[i + 1];
      i += 2;
    } else if ("|&;<>".includes(c)) {
      push();
      const op = text.slice(i, i + 2) === "&&" || text.slice(i, i + 2) === "||"
        ? text.slice(i, i + 2)
        : c;
      words.push({ op });
      i += op.length;
    } else {
      current = (current ?? "") + c;
      i++;
    }
  }
  push();
  return words;
}

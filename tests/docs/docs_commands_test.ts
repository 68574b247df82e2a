/**
 * Everything a reader copies from the README and docs/*.md runs as written. Every command of a
 * ```sh or ```bash block is either run here or listed with the reason it is not (and then at least
 * checked: its task exists and its --help names every flag it uses). An unknown command fails the
 * first test: run it (RULES) or list it with a reason.
 *
 * The runs follow "Running it for real": the docs' own `deno task demo --write-config ...` is the
 * setup (with `--port 0` added), `deno task start --config ...` the second router the admin curls
 * talk to, and every other command runs in the docs' order against them. So that the test can run
 * beside anything, the docs' fixed paths and ports are moved, and only those:
 *   /tmp/tidegate* → a temp directory;  127.0.0.1:8080 → the demo's port (0, chosen by the OS);
 *   127.0.0.1:8081 → a free port written into the demo's config file before `start` runs (with
 *   `"workers": 0` beside it: the same answers, without loading tokenizers into threads).
 * `deno task X` runs the task's command line from deno.json; curl is done with fetch (same method,
 * headers and body), and must answer below 400. The README's ```ts blocks run too, with
 * "@tidegate/tidegate" resolved by deno.json. Loopback only; every process is bounded in time.
 */
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import { assert, assertEquals } from "../assert.ts";
import {
  type DocBlock,
  type DocCommand,
  docFiles,
  fencedBlocks,
  shellCommands,
  shellWords,
  stripComment,
  type Word,
} from "./doc_blocks.ts";
import { eventually } from "../support/eventually.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { ConfigSchema, ModelSchema } from "../../src/config/schema.ts";

const ROOT = new URL("../../", import.meta.url);
const ROOT_PATH = fileURLToPath(ROOT);
const DENO = Deno.execPath();
const TASKS: Record<string, string> =
  JSON.parse(Deno.readTextFileSync(new URL("deno.json", ROOT))).tasks;

const BLOCKS: DocBlock[] = docFiles(ROOT).flatMap((file) =>
  fencedBlocks(file, Deno.readTextFileSync(new URL(file, ROOT)))
);
const COMMANDS: DocCommand[] = shellCommands(BLOCKS);

// ---------------------------------------------------------------------------------------------
// What is done with each command.

/** How a command is covered. */
type Plan =
  /** `export NAME=value`: set for the commands after it. */
  | { kind: "env"; name: string; value: string }
  /** The demo with --write-config: the setup every cluster command runs against. */
  | { kind: "demo" }
  /** `start --config FILE`: the second router, started for the commands after it. */
  | { kind: "server" }
  /** Run to its end (exit 0), against the demo's cluster. */
  | { kind: "run" }
  /** Not run: why, and what is checked instead. */
  | { kind: "listed"; reason: string; check: Check };

/** What a listed command is checked for. */
type Check =
  /** `deno task NAME`: the task exists; `--help` exits 0 and names every flag used. */
  | { task: "help" }
  /** The task exists and takes no flags (it has no --help): the command uses none. */
  | { task: "no-flags" }
  /** `deno task soak`: exits 2 on `--minutes 1`, its documented minimum, with the usage naming every flag. */
  | { task: "soak-usage" }
  /** `dist/tidegate CMD`: the same command of cli/main.ts takes the flags. */
  | { binary: true }
  /** The repository paths it names exist. */
  | { paths: true };

interface Rule {
  /** Matches the command's words (after `npx -y deno@2.9.6` became `deno` and env assignments went). */
  when: (words: string[]) => boolean;
  plan: (words: string[]) => Plan;
}

const isTask = (words: string[], ...names: string[]) =>
  words[0] === "deno" && words[1] === "task" && names.includes(words[2]);

const RULES: Rule[] = [
  {
    when: (w) => w[0] === "export" && w.length === 2 && /^\w+=/.test(w[1]),
    plan: (w) => ({ kind: "env", name: w[1].split("=")[0], value: w[1].replace(/^\w+=/, "") }),
  },
  {
    when: (w) => isTask(w, "demo") && w.includes("--write-config"),
    plan: () => ({ kind: "demo" }),
  },
  {
    when: (w) => isTask(w, "demo"),
    plan: () => ({
      kind: "listed",
      reason:
        "the demo serves until Ctrl-C (with --exit it runs its ~30 s burst); the setup here " +
        "runs it with --write-config, tests/cli/demo_test.ts runs its other options",
      check: { task: "help" },
    }),
  },
  {
    when: (w) => isTask(w, "start") && !w.includes("--check"),
    plan: () => ({ kind: "server" }),
  },
  { when: (w) => isTask(w, "start", "keys"), plan: () => ({ kind: "run" }) },
  {
    when: (w) => isTask(w, "sim:grid"),
    plan: () => ({
      kind: "listed",
      reason: "replays every policy on 126 cells (about 20 minutes per seed on two cores); " +
        "tests/sim/policy_grid_test.ts runs a cell",
      check: { task: "help" },
    }),
  },
  {
    when: (w) => isTask(w, "sim"),
    plan: () => ({
      kind: "listed",
      reason: "replays the 12,031-request trace once per policy (15-30 s of CPU each); " +
        "tests/sim/cli_test.ts runs the simulator's command line",
      check: { task: "help" },
    }),
  },
  { when: (w) => w[0] === "curl", plan: () => ({ kind: "run" }) },
  {
    when: (w) => isTask(w, "test", "test:real", "setup:real", "test:deploy") || isDenoTest(w),
    plan: () => ({
      kind: "listed",
      reason: "the test suites themselves (this test is part of `deno task test`; `test:real` " +
        "installs 3.6 GB of Python programs first)",
      check: { paths: true },
    }),
  },
  {
    when: (w) => isTask(w, "check") || (w[0] === "deno" && ["fmt", "lint", "check"].includes(w[1])),
    plan: () => ({
      kind: "listed",
      reason: "formats, lints and type-checks the tree: a development step, not a behaviour",
      check: { paths: true },
    }),
  },
  {
    when: (w) => isTask(w, "docs:config"),
    plan: () => ({
      kind: "listed",
      reason: "rewrites docs/configuration.md; configuration_doc_test.ts runs its generator",
      check: { task: "help" },
    }),
  },
  {
    when: (w) => isTask(w, "bench:hash", "bench:overhead"),
    plan: () => ({
      kind: "listed",
      reason: "a benchmark: minutes of saturated CPU (bench:overhead also needs nginx and wrk)",
      check: { task: "help" },
    }),
  },
  {
    when: (w) => isTask(w, "bench:policies"),
    plan: () => ({
      kind: "listed",
      reason: "a benchmark on two real vLLM engines: about 10 minutes of saturated CPU",
      check: { task: "help" },
    }),
  },
  {
    when: (w) => isTask(w, "bench:tokenize", "bench:predispatch", "bench:request"),
    plan: () => ({
      kind: "listed",
      reason: "a benchmark: a minute or more of saturated CPU",
      check: { task: "no-flags" },
    }),
  },
  {
    when: (w) => isTask(w, "soak"),
    plan: () => ({
      kind: "listed",
      reason: "a soak runs for minutes (tests/soak/bounded_soak_test.ts runs a bounded one)",
      check: { task: "soak-usage" },
    }),
  },
  {
    when: (w) => isTask(w, "compile"),
    plan: () => ({
      kind: "listed",
      reason: "downloads Deno's denort runtime; tests/deploy/binary_test.ts builds and runs it",
      check: { task: "no-flags" },
    }),
  },
  {
    when: (w) => w[0] === "dist/tidegate",
    plan: () => ({
      kind: "listed",
      reason: "needs the compiled binary (deno task compile)",
      check: { binary: true },
    }),
  },
  {
    when: (w) => w[0] === "docker" || w[0] === "kubectl",
    plan: () => ({
      kind: "listed",
      reason:
        "needs a Docker daemon, a registry or a Kubernetes cluster; tests/deploy checks the " +
        "image's command line and renders and validates the manifests",
      check: { paths: true },
    }),
  },
  {
    when: (w) => w[0] === "npm" && w[1] === "install",
    plan: () => ({ kind: "listed", reason: "installs Deno globally", check: { paths: true } }),
  },
  {
    when: (w) => w[0] === ".ci/run",
    plan: () => ({
      kind: "listed",
      reason: "CI: installs Debian packages, then runs both test suites",
      check: { paths: true },
    }),
  },
  {
    when: (w) => w[0] === "yes",
    plan: () => ({
      kind: "listed",
      reason: "a load generator beside the suite (it never ends by itself)",
      check: { paths: true },
    }),
  },
  {
    when: (w) => w[0] === "deno" && w[1] === "run" && w.includes("tests/architecture_test.ts"),
    plan: () => ({
      kind: "listed",
      reason: "rewrites docs/architecture.md's import table, which tests/architecture_test.ts " +
        "checks",
      check: { paths: true },
    }),
  },
];

function isDenoTest(words: string[]): boolean {
  return words[0] === "deno" && words[1] === "test";
}

/** The words of a command as it is planned: `npx -y deno@X` is `deno`, env assignments apart. */
function planWords(text: string, env: Record<string, string> = {}): {
  words: string[];
  ops: string[];
  assignments: Record<string, string>;
} {
  const all: Word[] = shellWords(
    text.replace(/^npx -y deno@[\d.]+ /, "deno "),
    (name) => env[name] ?? Deno.env.get(name) ?? "",
  );
  const words = all.flatMap((w) => "word" in w ? [w.word] : []);
  const ops = all.flatMap((w) => "op" in w ? [w.op] : []);
  const assignments: Record<string, string> = {};
  while (words.length > 1 && /^[A-Z_][A-Z0-9_]*=/.test(words[0]) && words[0] !== "export") {
    const [name, ...value] = words.shift()!.split("=");
    assignments[name] = value.join("=");
  }
  return { words, ops, assignments };
}

function planOf(command: DocCommand): Plan | undefined {
  const { words } = planWords(command.text);
  return RULES.find((rule) => rule.when(words))?.plan(words);
}

const where = (c: { file: string; line: number }) => `${c.file}:${c.line}`;

Deno.test("every command in the README and docs/*.md is run here or listed with a reason", () => {
  assert(COMMANDS.length > 20, `found only ${COMMANDS.length} commands: is the extraction right?`);
  const unknown = COMMANDS.filter((c) => planOf(c) === undefined).map((c) =>
    `${where(c)}: ${c.text}`
  );
  assertEquals(
    unknown,
    [],
    "commands neither run nor listed: add a rule to RULES in tests/docs/docs_commands_test.ts",
  );
  const demo = COMMANDS.filter((c) => planOf(c)?.kind === "demo");
  assert(demo.length >= 1, "the docs show the demo writing its config (the runs' setup)");
  // The examples point at the demo's cluster through these paths and ports only.
  const stray = COMMANDS.filter((c) =>
    /localhost:\d|\/tmp\/(?!tidegate)/.test(c.text) ||
    (/^curl /.test(c.text) && !/ http:\/\/127\.0\.0\.1:808[01]\//.test(c.text))
  ).map((c) => `${where(c)}: ${c.text}`);
  assertEquals(stray, [], "use http://127.0.0.1:8080 / :8081 and /tmp/tidegate* paths");
  // Two commands run together on one line (a lost newline) read as one with odd arguments.
  const joined = COMMANDS.filter((c) => planWords(c.text).words.indexOf("task", 2) !== -1)
    .map((c) => `${where(c)}: ${c.text}`);
  assertEquals(joined, [], "one `deno task` per command");
});

Deno.test("every admin curl in the docs carries the admin token", () => {
  const inline = docFiles(ROOT).flatMap((file) =>
    [...Deno.readTextFileSync(new URL(file, ROOT)).matchAll(/`(curl [^`]*\/admin\/[^`]*)`/g)].map(
      (m) => ({ file, line: 0, text: m[1] }),
    )
  );
  const missing = [...COMMANDS, ...inline]
    .filter((c) => /^curl .*\/admin\//.test(c.text))
    .filter((c) => !c.text.includes('-H "Authorization: Bearer $TIDEGATE_ADMIN_TOKEN"'))
    .map((c) => `${c.file}: ${c.text}`);
  assertEquals(missing, []);
});

// ---------------------------------------------------------------------------------------------
// The listed commands: the task exists and takes the flags.

const helpCache = new Map<string, Promise<{ code: number; out: string }>>();

function commandOutput(args: string[]): Promise<{ code: number; out: string }> {
  const key = args.join("\0");
  if (!helpCache.has(key)) {
    helpCache.set(
      key,
      new Deno.Command(DENO, {
        args,
        cwd: ROOT_PATH,
        env: { NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(60_000),
      }).output().then((o) => ({
        code: o.code,
        out: new TextDecoder().decode(o.stdout) + new TextDecoder().decode(o.stderr),
      })),
    );
  }
  return helpCache.get(key)!;
}

/** The command line of a deno.json task, as words (its leading `deno` dropped). */
function taskArgs(name: string): string[] {
  const line = TASKS[name];
  assert(line !== undefined, `deno.json has no task "${name}"`);
  const words = line.split(/\s+/);
  assert(words[0] === "deno", `task ${name} does not run deno: ${line}`);
  return words.slice(1);
}

function flagsOf(words: string[]): string[] {
  return words.filter((w) => w.startsWith("--")).map((w) => w.split("=")[0]);
}

async function checkListed(command: DocCommand, check: Check): Promise<string[]> {
  const { words } = planWords(command.text);
  const problems: string[] = [];
  const missingFlags = (flags: string[], out: string) =>
    flags.filter((f) => !new RegExp(`${f}\\b`).test(out)).map((f) => `${f} is not in its usage`);
  if ("task" in check) {
    const name = words[2];
    if (TASKS[name] === undefined) return [`deno.json has no task "${name}"`];
    const flags = flagsOf(words.slice(3));
    if (check.task === "help") {
      const { code, out } = await commandOutput([...taskArgs(name), "--help"]);
      if (code !== 0) problems.push(`--help exits ${code}`);
      problems.push(...missingFlags(flags, out));
    } else if (check.task === "no-flags") {
      if (flags.length) problems.push(`uses ${flags.join(", ")}, but the task takes no flags`);
    } else {
      const { code, out } = await commandOutput([...taskArgs(name), "--minutes", "1"]);
      if (code !== 2) problems.push(`--minutes 1 exits ${code}, not 2 (its minimum is above 1)`);
      problems.push(...missingFlags(flags, out));
      const minutes = Number(words[words.indexOf("--minutes") + 1]);
      if (words.includes("--minutes") && !(minutes > 1)) problems.push("--minutes must exceed 1");
    }
  } else if ("binary" in check) {
    const { code, out } = await commandOutput(["run", "-A", "cli/main.ts", words[1], "--help"]);
    if (code !== 0) problems.push(`cli/main.ts ${words[1]} --help exits ${code}`);
    problems.push(...missingFlags(flagsOf(words.slice(2)), out));
  }
  for (const path of words.filter((w) => /^(deploy|tests|docs|src|cli|routes)\//.test(w))) {
    try {
      Deno.statSync(new URL(path, ROOT));
    } catch {
      problems.push(`${path} does not exist`);
    }
  }
  return problems.map((p) => `${where(command)}: ${command.text}: ${p}`);
}

Deno.test("the listed commands name tasks that exist, flags they take and paths that exist", async () => {
  const listed = COMMANDS.flatMap((c) => {
    const plan = planOf(c);
    return plan?.kind === "listed" ? [{ command: c, check: plan.check }] : [];
  });
  const problems = (await Promise.all(listed.map((l) => checkListed(l.command, l.check)))).flat();
  assertEquals(problems, []);
});

// ---------------------------------------------------------------------------------------------
// The runs, against the demo's cluster.

/** A process started for the commands after it, and what it has written so far. */
interface Background {
  child: Deno.ChildProcess;
  output: string[];
  lines: Set<(line: string) => void>;
}

function spawn(args: string[], env: Record<string, string>): Background {
  const child = new Deno.Command(DENO, {
    args,
    cwd: ROOT_PATH,
    env: { ...env, NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const background: Background = { child, output: [], lines: new Set() };
  const read = async (stream: ReadableStream<Uint8Array>) => {
    let rest = "";
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      const parts = (rest + chunk).split("\n");
      rest = parts.pop()!;
      for (const line of parts) {
        background.output.push(line);
        for (const listener of background.lines) listener(line);
      }
    }
  };
  read(child.stdout);
  read(child.stderr);
  return background;
}

/** Resolves with the first line (already written or to come) that `match` accepts. */
function lineMatching(process: Background, match: RegExp, timeoutMs: number): Promise<string> {
  const seen = process.output.find((line) => match.test(line));
  if (seen) return Promise.resolve(seen);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      process.lines.delete(listener);
      reject(
        new Error(
          `no line matching ${match} within ${timeoutMs} ms:\n${
            process.output.slice(-30).join("\n")
          }`,
        ),
      );
    }, timeoutMs);
    const listener = (line: string) => {
      if (!match.test(line)) return;
      clearTimeout(timer);
      process.lines.delete(listener);
      resolve(line);
    };
    process.lines.add(listener);
    process.child.status.then(() => {
      if (!process.lines.has(listener)) return;
      clearTimeout(timer);
      process.lines.delete(listener);
      reject(new Error(`exited before ${match}:\n${process.output.slice(-30).join("\n")}`));
    });
  });
}

/** What the runs share: the moved paths and ports, the environment, the started processes. */
interface Session {
  tmp: string;
  env: Record<string, string>;
  demoAddress?: string;
  startPort?: number;
  demo?: Background;
  server?: Background;
}

function moved(text: string, session: Session): string {
  let out = text.replace(/\/tmp\/(tidegate[\w.-]*)/g, `${session.tmp}/$1`);
  if (session.demoAddress) out = out.replaceAll("127.0.0.1:8080", session.demoAddress);
  if (session.startPort) out = out.replaceAll("127.0.0.1:8081", `127.0.0.1:${session.startPort}`);
  return out;
}

/** `deno task NAME args...` as the task's own command line, for a direct child process. */
function denoArgs(words: string[]): string[] {
  if (words[1] === "task") return [...taskArgs(words[2]), ...words.slice(3)];
  return words.slice(1);
}

/** Bounds of one command, and of the demo or the second router getting ready (busy machines). */
const RUN_TIMEOUT_MS = 90_000;
const SETUP_TIMEOUT_MS = 180_000;

/** Runs one command to its end; the problem, or undefined when it did as documented. */
async function runCommand(command: DocCommand, session: Session): Promise<string | undefined> {
  const { words, ops, assignments } = planWords(moved(command.text, session), session.env);
  const env = { ...session.env, ...assignments };
  if (words[0] === "curl") return await curl(words, ops);
  if (ops.length) return `runs only single commands, not ${ops.join(" ")}`;
  const output = await new Deno.Command(DENO, {
    args: denoArgs(words),
    cwd: ROOT_PATH,
    env: { ...env, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(RUN_TIMEOUT_MS),
  }).output();
  if (output.code === 0) return undefined;
  const text = new TextDecoder().decode(output.stdout) + new TextDecoder().decode(output.stderr);
  return `exit ${output.code}:\n${text.slice(-3000)}`;
}

/**
 * curl as the docs use it (-s, -S, -i, -D -, -X, -H, -d / --data / --data-binary, one URL,
 * optionally piped into grep), done with fetch: the answer must be below 400 and the grep must
 * find a line.
 */
async function curl(words: string[], ops: string[]) {
  const pipe = ops.indexOf("|");
  let grep: RegExp | undefined;
  let args = words.slice(1);
  if (ops.length) {
    if (ops.length !== 1 || pipe !== 0) return `curl takes at most one pipe into grep`;
    const grepAt = args.indexOf("grep");
    if (grepAt < 0 || grepAt !== args.length - 2) return "the pipe must go into grep PATTERN";
    grep = new RegExp(args[grepAt + 1], "m");
    args = args.slice(0, grepAt);
  }
  const headers = new Headers();
  let method: string | undefined;
  let body: string | undefined;
  let url: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "-s" || arg === "-S" || arg === "-sS" || arg === "-i" || arg === "--silent") {
      continue;
    }
    if (arg === "-D" || arg === "--dump-header") {
      if (args[++i] !== "-") return "-D takes - (stdout) only here";
    } else if (arg === "-X" || arg === "--request") method = args[++i];
    else if (arg === "-H" || arg === "--header") {
      const [name, ...value] = args[++i].split(":");
      headers.set(name.trim(), value.join(":").trim());
    } else if (arg === "-d" || arg === "--data" || arg === "--data-binary") {
      const data = args[++i];
      body = data.startsWith("@") ? await Deno.readTextFile(new URL(data.slice(1), ROOT)) : data;
      // curl -d @file drops the file's newlines; --data-binary keeps them.
      if (arg !== "--data-binary" && data.startsWith("@")) body = body.replace(/[\r\n]/g, "");
      if (!headers.has("content-type")) {
        headers.set("content-type", "application/x-www-form-urlencoded");
      }
    } else if (/^https?:\/\//.test(arg)) url = arg;
    else return `curl flag ${arg} is not one this test performs`;
  }
  if (!url) return "no URL";
  if (!/^http:\/\/127\.0\.0\.1:\d+\//.test(url)) return `not a loopback URL: ${url}`;
  const response = await fetch(url, {
    method: method ?? (body === undefined ? "GET" : "POST"),
    headers,
    body,
    signal: AbortSignal.timeout(30_000),
  });
  const text = await response.text();
  if (response.status >= 400) return `HTTP ${response.status}: ${text.slice(0, 1000)}`;
  if (grep && !grep.test(text)) return `grep ${grep} found nothing in:\n${text.slice(0, 1000)}`;
  return undefined;
}

async function startDemo(command: DocCommand, session: Session): Promise<string | undefined> {
  if (session.demo) return "the demo runs already (one setup only)";
  const { words } = planWords(moved(command.text, session), session.env);
  const demo = spawn([...denoArgs(words), "--port", "0"], session.env);
  session.demo = demo;
  const router = await lineMatching(demo, /^Router \(.*\) on http:\/\/(\S+)\./, SETUP_TIMEOUT_MS);
  session.demoAddress = /on http:\/\/(\S+)\./.exec(router)![1];
  await lineMatching(demo, /Press Ctrl-C/, SETUP_TIMEOUT_MS);
  // The config the demo wrote listens on 127.0.0.1:8081: move it to a port free now.
  const configPath = `${session.tmp}/tidegate.json`;
  const config = JSON.parse(await Deno.readTextFile(configPath));
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  session.startPort = (probe.addr as Deno.NetAddr).port;
  probe.close();
  assertEquals(config.listen, { host: "127.0.0.1", port: 8081 }, "what the docs say it writes");
  config.listen.port = session.startPort;
  // Tokenizing on the main loop: the same answers, without loading the tokenizer in threads.
  config.workers = 0;
  await Deno.writeTextFile(configPath, JSON.stringify(config, null, 2));
  return undefined;
}

async function startServer(command: DocCommand, session: Session): Promise<string | undefined> {
  if (!session.demo) return "start before the demo's config was written";
  if (session.server) return "a second start (one server only)";
  const { words, assignments } = planWords(moved(command.text, session), session.env);
  const server = spawn(denoArgs(words), { ...session.env, ...assignments });
  session.server = server;
  await lineMatching(server, /"msg":"tidegate listening"/, SETUP_TIMEOUT_MS);
  await eventually(
    async () => {
      const response = await fetch(`http://127.0.0.1:${session.startPort}/readyz`).catch(() =>
        null
      );
      await response?.body?.cancel();
      return response?.status === 200;
    },
    30_000,
    "the second router's /readyz",
  );
  return undefined;
}

async function stop(process: Background | undefined, signal: Deno.Signal) {
  if (!process) return undefined;
  try {
    process.child.kill(signal);
  } catch {
    // already gone
  }
  const status = await process.child.status;
  return status.code;
}

/** A ```ts block of the docs, with "@tidegate/tidegate" resolved by deno.json. */
async function runTsBlock(block: DocBlock, session: Session): Promise<string | undefined> {
  const path = `${session.tmp}/block_${block.line}.ts`;
  await Deno.writeTextFile(path, moved(block.text, session));
  const output = await new Deno.Command(DENO, {
    args: ["run", "-A", "--config", fileURLToPath(new URL("deno.json", ROOT)), path],
    cwd: ROOT_PATH,
    env: { ...session.env, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(RUN_TIMEOUT_MS),
  }).output();
  if (output.code === 0) return undefined;
  return `exit ${output.code}:\n${new TextDecoder().decode(output.stderr).slice(-3000)}`;
}

Deno.test({
  name: "the docs' commands run as written against the demo's cluster",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const session: Session = {
      tmp: await Deno.makeTempDir({ prefix: "tidegate-docs-" }),
      env: {},
    };
    const failures: string[] = [];
    const timings: string[] = [];
    const fail = (c: { file: string; line: number; text: string }, problem: string) =>
      failures.push(`${where(c)}: ${c.text}\n  ${problem.replaceAll("\n", "\n  ")}`);
    try {
      const planned = COMMANDS.map((command) => ({ command, plan: planOf(command)! }));
      // A command shown in several places (keys --probe, say) runs once.
      const ran = new Set<string>();
      for (const { command, plan } of planned) {
        const started = performance.now();
        let problem: string | undefined;
        try {
          if (plan.kind === "env") session.env[plan.name] = plan.value;
          else if (plan.kind === "demo") problem = await startDemo(command, session);
          else if (plan.kind === "server") problem = await startServer(command, session);
          else if (
            plan.kind === "run" && (!/^deno /.test(command.text) || !ran.has(command.text))
          ) {
            ran.add(command.text);
            problem = session.demo
              ? await runCommand(command, session)
              : "comes before the demo that writes its config";
          }
        } catch (error) {
          problem = String(error);
        }
        if (problem) fail(command, problem);
        if (plan.kind !== "env" && plan.kind !== "listed") {
          timings.push(`${Math.round(performance.now() - started)} ms  ${where(command)}`);
        }
      }
      for (const block of BLOCKS.filter((b) => b.lang === "ts" && b.file === "README.md")) {
        const problem = await runTsBlock(block, session).catch((e) => String(e));
        if (problem) fail({ ...block, text: "```ts block" }, problem);
      }
    } finally {
      const [server, demo] = await Promise.all([
        stop(session.server, "SIGTERM"),
        stop(session.demo, "SIGINT"),
      ]);
      if (server !== undefined && server !== 0) failures.push(`start exited ${server} on SIGTERM`);
      if (demo !== undefined && demo !== 0) failures.push(`the demo exited ${demo} on Ctrl-C`);
      await Deno.remove(session.tmp, { recursive: true }).catch(() => {});
    }
    assertEquals(failures, [], `times:\n${timings.join("\n")}`);
  },
});

// ---------------------------------------------------------------------------------------------
// Config snippets.

/** The smallest valid config: a snippet is checked inside it, where its keys belong. */
const BASE = {
  models: [{
    name: "qwen3",
    tokenizer: { path: "builtin:qwen3" },
    kv: { url: "http://127.0.0.1:9003" },
    instances: [{ id: "gpu-a", url: "http://127.0.0.1:8001" }],
  }],
};

/** A JSON or YAML block as a whole config, or undefined when it is not a config (or part of one). */
function asConfig(block: DocBlock): unknown {
  let value: unknown;
  try {
    value = block.lang === "json" ? JSON.parse(block.text) : parseYaml(block.text);
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const keys = Object.keys(value);
  const top = Object.keys(ConfigSchema.shape);
  const model = Object.keys(ModelSchema.shape);
  if (keys.includes("models")) return value;
  if (keys.length && keys.every((k) => top.includes(k))) return { ...BASE, ...value };
  if (keys.length && keys.every((k) => model.includes(k))) {
    return { models: [{ ...BASE.models[0], ...value }] };
  }
  return undefined;
}

Deno.test("every config and config snippet in the docs is valid", () => {
  const configs = BLOCKS.filter((b) => b.lang === "json" || b.lang === "yaml")
    .flatMap((block) => {
      const config = asConfig(block);
      return config === undefined ? [] : [{ block, config }];
    });
  assert(configs.length >= 4, `found ${configs.length} config blocks`);
  const invalid = configs.flatMap(({ block, config }) => {
    try {
      resolveConfig(config, { env: () => "value" });
      return [];
    } catch (error) {
      return [`${where(block)}: ${(error as Error).message}`];
    }
  });
  assertEquals(invalid, []);
});

Deno.test("commands are read as a shell reads them", () => {
  assertEquals(stripComment("deno task test    # every test"), "deno task test    ");
  assertEquals(stripComment('curl -d \'{"a": "#1"}\' # c'), 'curl -d \'{"a": "#1"}\' ');
  const words = shellWords(
    `curl -H "Authorization: Bearer $T" -d '{"model": "q"}' http://x/ | grep '^t'`,
    (name) => name === "T" ? "tok" : "",
  );
  assertEquals(words, [
    { word: "curl" },
    { word: "-H" },
    { word: "Authorization: Bearer tok" },
    { word: "-d" },
    { word: '{"model": "q"}' },
    { word: "http://x/" },
    { op: "|" },
    { word: "grep" },
    { word: "^t" },
  ]);
  const joined = shellCommands([{
    file: "x.md",
    line: 3,
    lang: "sh",
    text: "# a comment\ndeno task sim --trace t \\\n  --out /tmp/tidegate-sim   # run\n",
  }]);
  assertEquals(joined, [{
    file: "x.md",
    line: 4,
    text: "deno task sim --trace t --out /tmp/tidegate-sim",
  }]);
});

/**
 * The tests' own rules (docs/testing.md), checked on their source:
 *
 * - No test waits for a fixed time to let something happen. Every `*_test.ts` under tests/ and
 *   every shared helper in tests/support/ waits on an event, on a condition
 *   (tests/support/eventually.ts, the one poll loop, the only place allowed to sleep) or on a
 *   hand-driven clock (tests/cluster/manual_time.ts). A sleep is `sleep(`, `delay(`, or a timer
 *   resolving a promise (`await new Promise((r) => setTimeout(r, 50))`). ALLOWED lists the few
 *   sleeps that are not waits: time that is itself the behaviour under test. Each entry names
 *   one line and why; an entry whose line is gone fails too, so the list stays true.
 * - No test installs anything: no file under tests/ runs apt-get (.ci/run installs the programs
 *   the tests drive; tests/support/needs_tool.ts ignores or fails a test whose program is missing).
 */
import { assert, assertEquals } from "./assert.ts";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const TESTS = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(TESTS, "..");

/** The one place a test may sleep: the poll interval of eventually(). */
const POLL_LOOP = "tests/support/eventually.ts";
/** This file, whose examples and allow-list quote sleeps. */
const SELF = relative(ROOT, fileURLToPath(import.meta.url));

/** Sleeps that are not waits: path → the line (trimmed) → why the time is the behaviour. */
const ALLOWED: { path: string; line: string; reason: string }[] = [
  {
    path: "tests/gateway/client_limits_test.ts",
    line: "if (gapMs) await new Promise((resolve) => setTimeout(resolve, gapMs));",
    reason: "a client trickling its body past limits.clientBodyTimeoutMs: the gaps are the test",
  },
  {
    path: "tests/gateway/client_connection_test.ts",
    line: "await new Promise((resolve) => setTimeout(resolve, 50));",
    reason:
      "a client trickling its headers past limits.clientHeaderTimeoutMs: the gaps are the test",
  },
  {
    path: "tests/kv/mooncake_client_test.ts",
    line: "const timer = setTimeout(resolve, 500);",
    reason: "a store batch slower than the client's 80 ms deadline (its abort ends it sooner)",
  },
  {
    path: "tests/dashboard/dashboard_browser_test.ts",
    line: "if (round > 0 && SCREENSHOT) await new Promise((r) => setTimeout(r, 5_000));",
    reason: "TIDEGATE_SCREENSHOT only: traffic spread over time so the TTFT chart has points",
  },
];

/** A timer resolving a promise, or a sleep()/delay() call; `x.setTimeout` (a fake clock) is not. */
const SLEEP = new RegExp(
  String
    .raw`(?<![.\w])setTimeout\(\s*(?:(?:r|res|resolve|wake)\b|\(\)\s*=>\s*(?:r|res|resolve|wake)\()` +
    String.raw`|(?<![.\w])(?:sleep|delay)\(`,
);

/** Lines of `text` that sleep, as [line number, trimmed line]; comments are skipped. */
export function sleepsIn(text: string): [number, string][] {
  const found: [number, string][] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line.startsWith("//") || line.startsWith("*") || line.startsWith("/*")) return;
    if (SLEEP.test(line)) found.push([i + 1, line]);
  });
  return found;
}

/** Every `.ts` file under `dir`, as paths relative to the repository root. */
function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of Deno.readDirSync(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) out.push(...tsFiles(path));
    else if (entry.isFile && entry.name.endsWith(".ts")) out.push(relative(ROOT, path));
  }
  return out.sort();
}

/** What the no-sleep rule reads: every test file, and every shared helper but the poll loop. */
function ruledFiles(): string[] {
  return tsFiles(TESTS).filter((path) =>
    (path.endsWith("_test.ts") || path.startsWith("tests/support/")) &&
    path !== POLL_LOOP && path !== SELF
  );
}

Deno.test("the sleep detector catches the ways a test sleeps, and only those", () => {
  const sleeps = [
    "await new Promise((r) => setTimeout(r, 50));",
    "await new Promise((resolve) => setTimeout(resolve, ms));",
    "await new Promise<void>((r) => setTimeout(() => r(), 10));",
    "await delay(100);",
    "await sleep(5);",
    "const timer = setTimeout(resolve, 500);",
  ];
  for (const line of sleeps) assertEquals(sleepsIn(line).length, 1, line);
  const waits = [
    'await eventually(() => engine.load().waiting === 2, 2_000, "two queued");',
    "time.setTimeout(resolve, 250);", // a hand-driven clock's timer
    'const killer = setTimeout(() => child.kill("SIGKILL"), 5_000);', // a deadline, not a wait
    "await sleepUntil(end, signal);",
    "master.setDelayMs(1_000);",
    "// await new Promise((r) => setTimeout(r, 50));",
  ];
  for (const line of waits) assertEquals(sleepsIn(line), [], line);
});

Deno.test("no test waits for a fixed time: it waits on an event, a condition or a hand-driven clock", () => {
  const files = ruledFiles();
  assert(files.length > 100, `only ${files.length} test files found`);
  const unexplained: string[] = [];
  const used = new Set<number>();
  for (const path of files) {
    for (const [number, line] of sleepsIn(Deno.readTextFileSync(join(ROOT, path)))) {
      const allowed = ALLOWED.findIndex((a) => a.path === path && a.line === line);
      if (allowed >= 0) used.add(allowed);
      else unexplained.push(`${path}:${number}: ${line}`);
    }
  }
  assertEquals(
    unexplained,
    [],
    "wait on an event, eventually() (tests/support/eventually.ts) or a hand-driven clock " +
      "instead of a sleep (docs/testing.md)",
  );
  const stale = ALLOWED.filter((_a, i) => !used.has(i)).map((a) => `${a.path}: ${a.line}`);
  assertEquals(stale, [], "allowed sleeps whose line is gone: drop them from ALLOWED");
});

Deno.test("no test runs apt-get: .ci/run installs what the tests drive", () => {
  const installers = tsFiles(TESTS).filter((path) =>
    /["'`]apt-get["'`]/.test(Deno.readTextFileSync(join(ROOT, path)))
  );
  assertEquals(installers, []);
});

/**
 * Reads a V8 `.cpuprofile` (what `deno run --cpu-prof` writes) and ranks functions by self time,
 * plus a rollup by area (tidegate's own code, each npm package, Deno's runtime, V8's GC). Used by
 * tests/bench/overhead_bench.ts; also runs alone:
 * `deno run -A tests/bench/overhead/cpuprofile.ts FILE.cpuprofile [--top 15] [--root /work/main]`.
 *
 * A sample's duration is the gap to the next sample (as Chrome DevTools counts it); `(idle)` is
 * kept apart so that shares are of the time the thread was busy.
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface FunctionTime {
  name: string;
  /** Repository-relative path, `npm:package@version/path`, or the runtime's own URL. */
  file: string;
  line: number;
  selfMs: number;
  /** Time with the function anywhere on the stack (recursion counted once). */
  totalMs: number;
}

export interface ProfileSummary {
  wallMs: number;
  idleMs: number;
  busyMs: number;
  functions: FunctionTime[];
  /** Self time by area, largest first. */
  areas: { area: string; selfMs: number }[];
}

/** `file:///work/main/src/x.ts` → `src/x.ts`; npm files → `npm:name@version/path`. */
export function shortFile(url: string, root: string): string {
  if (url === "") return "";
  let path = url.startsWith("file://") ? decodeURIComponent(new URL(url).pathname) : url;
  const npm = path.match(
    /node_modules\/\.deno\/([^/]+)\/node_modules\/((?:@[^/]+\/)?[^/]+)\/(.*)$/,
  );
  if (npm) {
    const version = npm[1].slice(npm[1].lastIndexOf("@") + 1);
    return `npm:${npm[2]}@${version}/${npm[3]}`;
  }
  const base = root.endsWith("/") ? root : `${root}/`;
  if (path.startsWith(base)) path = path.slice(base.length);
  return path;
}

/** Where a function's time goes, coarsely: tidegate's folders, an npm package, Deno, V8. */
export function areaOf(name: string, file: string): string {
  if (file === "") {
    if (name.startsWith("op_")) return "Deno runtime (native ops: op_*)";
    if (name === "(garbage collector)") return "V8: garbage collector";
    if (name === "(program)") return "V8/native: (program)";
    return `V8: ${name || "(anonymous native)"}`;
  }
  const npm = file.match(/^npm:((?:@[^/]+\/)?[^@/]+)@/);
  if (npm) return `npm: ${npm[1]}`;
  if (file.startsWith("ext:") || file.startsWith("node:")) return "Deno runtime (JavaScript: ext:)";
  const top = file.match(/^(src\/[^/]+|routes|cli|mod\.ts|tests\/[^/]+)/);
  if (top) return `tidegate: ${top[1]}`;
  return file;
}

/**
 * `window`: only samples taken between these offsets from the profile's start (milliseconds),
 * e.g. the measured run without the process's start-up.
 */
export function summarizeProfile(
  profile: CpuProfile,
  root: string,
  window?: { fromMs: number; toMs: number },
): ProfileSummary {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const keyOf = new Map<number, string>();
  const entries = new Map<string, FunctionTime>();
  for (const node of profile.nodes) {
    const frame = node.callFrame;
    const file = shortFile(frame.url, root);
    const name = frame.functionName || "(anonymous)";
    const key = `${name}\u0000${file}\u0000${frame.lineNumber}`;
    keyOf.set(node.id, key);
    if (!entries.has(key)) {
      entries.set(key, { name, file, line: frame.lineNumber + 1, selfMs: 0, totalMs: 0 });
    }
  }

  let idleUs = 0;
  let wallUs = 0;
  const { samples, timeDeltas } = profile;
  let atUs = 0;
  for (let i = 0; i < samples.length; i++) {
    atUs += timeDeltas[i] ?? 0;
    if (window && (atUs < window.fromMs * 1000 || atUs > window.toMs * 1000)) continue;
    const us = i + 1 < timeDeltas.length ? Math.max(0, timeDeltas[i + 1]) : 0;
    wallUs += us;
    const id = samples[i];
    const node = byId.get(id);
    if (!node) continue;
    if (node.callFrame.functionName === "(idle)") {
      idleUs += us;
      continue;
    }
    entries.get(keyOf.get(id)!)!.selfMs += us / 1000;
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const key = keyOf.get(at)!;
      if (seen.has(key)) continue;
      seen.add(key);
      entries.get(key)!.totalMs += us / 1000;
    }
  }

  const functions = [...entries.values()].filter((f) =>
    f.name !== "(root)" && f.name !== "(idle)" && f.selfMs + f.totalMs > 0
  );
  const areas = new Map<string, number>();
  for (const f of functions) {
    const area = areaOf(f.name, f.file);
    areas.set(area, (areas.get(area) ?? 0) + f.selfMs);
  }
  return {
    wallMs: wallUs / 1000,
    idleMs: idleUs / 1000,
    busyMs: (wallUs - idleUs) / 1000,
    functions: functions.sort((a, b) => b.selfMs - a.selfMs),
    areas: [...areas].map(([area, selfMs]) => ({ area, selfMs })).sort((a, b) =>
      b.selfMs - a.selfMs
    ),
  };
}

/** Markdown tables: the top functions by self time, then self time by area. */
export function formatSummary(
  summary: ProfileSummary,
  options: { top?: number; requests?: number; areas?: number } = {},
): string {
  const top = options.top ?? 15;
  const pct = (ms: number) => `${(100 * ms / summary.busyMs).toFixed(1)}%`;
  const perRequest = (ms: number) =>
    options.requests ? ` | ${(1000 * ms / options.requests).toFixed(1)}` : "";
  const perRequestHead = options.requests ? " | µs/request" : "";
  const perRequestRule = options.requests ? "|---:" : "";
  const lines = [
    `Profile: ${(summary.wallMs / 1000).toFixed(1)} s sampled, busy ${
      (summary.busyMs / 1000).toFixed(2)
    } s, idle ${(summary.idleMs / 1000).toFixed(2)} s` +
    (options.requests ? `, ${options.requests} requests` : ""),
    "",
    `| # | function | file:line | self ms | self % of busy${perRequestHead} | total % |`,
    `|---:|---|---|---:|---:${perRequestRule}|---:|`,
  ];
  summary.functions.slice(0, top).forEach((f, i) => {
    lines.push(
      `| ${i + 1} | \`${f.name}\` | ${f.file ? `${f.file}:${f.line}` : "(native)"} | ${
        f.selfMs.toFixed(0)
      } | ${pct(f.selfMs)}${perRequest(f.selfMs)} | ${pct(f.totalMs)} |`,
    );
  });
  lines.push(
    "",
    `| area | self ms | self % of busy${perRequestHead} |`,
    `|---|---:|---:${perRequestRule}|`,
  );
  for (const a of summary.areas.slice(0, options.areas ?? 14)) {
    lines.push(`| ${a.area} | ${a.selfMs.toFixed(0)} | ${pct(a.selfMs)}${perRequest(a.selfMs)} |`);
  }
  return lines.join("\n");
}

/**
 * Tidegate's own functions by inclusive time (their callees included): where the request path
 * spends its time, seen from the code that asks for it. Synchronous stacks only: work resumed
 * after an `await` is counted under the function that resumed, not the one that awaited.
 */
export function formatInclusive(summary: ProfileSummary, top = 15): string {
  const own = summary.functions.filter((f) => /^(src|routes|cli)\//.test(f.file))
    .sort((a, b) => b.totalMs - a.totalMs).slice(0, top);
  const lines = [
    "| function | file:line | total ms | total % of busy |",
    "|---|---|---:|---:|",
  ];
  for (const f of own) {
    lines.push(
      `| \`${f.name}\` | ${f.file}:${f.line} | ${f.totalMs.toFixed(0)} | ${
        (100 * f.totalMs / summary.busyMs).toFixed(1)
      }% |`,
    );
  }
  return lines.join("\n");
}

if (import.meta.main) {
  const [file] = Deno.args.filter((a) => !a.startsWith("--"));
  if (!file) {
    console.error(
      "Usage: deno run -A tests/bench/overhead/cpuprofile.ts FILE.cpuprofile [--top N]",
    );
    Deno.exit(2);
  }
  const flag = (name: string) => {
    const at = Deno.args.indexOf(name);
    return at >= 0 ? Deno.args[at + 1] : undefined;
  };
  const root = flag("--root") ?? new URL("../../..", import.meta.url).pathname;
  const summary = summarizeProfile(JSON.parse(await Deno.readTextFile(file)), root);
  console.log(formatSummary(summary, { top: Number(flag("--top") ?? 15) }));
  console.log("");
  console.log(formatInclusive(summary));
}

/**
 * Child processes of tests/bench/overhead_bench.ts (started, logged to files, stopped by pid) and
 * their CPU time from /proc.
 */
import { eventually } from "../../support/eventually.ts";

export interface Started {
  name: string;
  pid: number;
  child: Deno.ChildProcess;
  log: string;
  /** performance.now() when it was spawned. */
  spawnedAt: number;
}

export async function start(
  name: string,
  command: string,
  args: string[],
  options: { cwd?: string; logDir: string; env?: Record<string, string> },
): Promise<Started> {
  const log = `${options.logDir}/${name}.log`;
  const file = await Deno.open(log, { write: true, create: true, truncate: true });
  const spawnedAt = performance.now();
  const child = new Deno.Command(command, {
    args,
    cwd: options.cwd,
    env: options.env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // Both streams into one file; the writes are serialized by the lock below.
  let chain = Promise.resolve();
  const drain = async (stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream) {
      chain = chain.then(() => file.write(chunk).then(() => {})).catch(() => {});
    }
  };
  Promise.all([drain(child.stdout), drain(child.stderr)]).finally(() =>
    chain.finally(() => file.close())
  ).catch(() => {});
  return { name, pid: child.pid, child, log, spawnedAt };
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code (or the signal's). */
export async function stop(proc: Started, graceMs = 5_000): Promise<number> {
  try {
    proc.child.kill("SIGTERM");
  } catch {
    // Already gone.
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const killed = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), graceMs);
  });
  const status = await Promise.race([proc.child.status, killed]);
  clearTimeout(timer);
  if (status !== "timeout") return status.code;
  try {
    proc.child.kill("SIGKILL");
  } catch {
    // Already gone.
  }
  return (await proc.child.status).code;
}

let clockTicks: number | undefined;

async function ticksPerSecond(): Promise<number> {
  if (clockTicks !== undefined) return clockTicks;
  try {
    const out = await new Deno.Command("getconf", { args: ["CLK_TCK"], stdout: "piped" }).output();
    clockTicks = Number(new TextDecoder().decode(out.stdout).trim()) || 100;
  } catch {
    clockTicks = 100;
  }
  return clockTicks;
}

function childrenOf(pid: number): number[] {
  const out: number[] = [];
  let tasks: Iterable<Deno.DirEntry>;
  try {
    tasks = Deno.readDirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const task of tasks) {
    try {
      const text = Deno.readTextFileSync(`/proc/${pid}/task/${task.name}/children`).trim();
      if (text) out.push(...text.split(/\s+/).map(Number));
    } catch {
      // Task ended meanwhile.
    }
  }
  return out;
}

/** utime + stime (all threads) of `pid` and its descendants, in milliseconds. */
export async function cpuMs(pid: number): Promise<number> {
  const hz = await ticksPerSecond();
  let ticks = 0;
  const pending = [pid];
  while (pending.length > 0) {
    const at = pending.pop()!;
    try {
      const stat = Deno.readTextFileSync(`/proc/${at}/stat`);
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14, 15)
    } catch {
      continue;
    }
    pending.push(...childrenOf(at));
  }
  return ticks * 1000 / hz;
}

export function loadAverage(): string {
  try {
    return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  } catch {
    return "unknown";
  }
}

export { freePort } from "../../support/free_port.ts";

/** Polls `url` until `ok(status)`: true, or false once `timeoutMs` passed. */
export async function waitFor(
  url: string,
  timeoutMs: number,
  ok: (status: number) => boolean = (s) => s === 200,
): Promise<boolean> {
  try {
    await eventually(
      async () => {
        try {
          const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
          await response.body?.cancel();
          return ok(response.status);
        } catch {
          return false; // not listening yet
        }
      },
      timeoutMs,
      url,
    );
    return true;
  } catch {
    return false;
  }
}

/** Busy CPU time of the whole machine (all cores, /proc/stat), in milliseconds. */
export async function machineBusyMs(): Promise<number> {
  const hz = await ticksPerSecond();
  const line = Deno.readTextFileSync("/proc/stat").split("\n")[0];
  const [user, nice, system, _idle, _iowait, irq, softirq, steal] = line.trim().split(/\s+/)
    .slice(1).map(Number);
  return (user + nice + system + irq + softirq + (steal ?? 0)) * 1000 / hz;
}

/**
 * CPU time of this process, its live descendants and its children already waited for (wrk after
 * each run), in milliseconds: subtracted from machineBusyMs it leaves other processes' load.
 */
export async function ownCpuMs(): Promise<number> {
  const hz = await ticksPerSecond();
  const stat = Deno.readTextFileSync("/proc/self/stat");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const waited = Number(fields[13]) + Number(fields[14]); // cutime, cstime (fields 16, 17)
  return await cpuMs(Deno.pid) + waited * 1000 / hz;
}

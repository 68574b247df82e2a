/**
 * A real program started by a test: its output goes to a log file (printed when it fails to
 * start, and kept for a failed test), it can be paused (SIGSTOP) and resumed, and stop() ends it
 * (SIGTERM, then SIGKILL after 10 s) with its whole process group.
 */
import { eventually } from "../support/eventually.ts";

export interface RealProcess {
  readonly pid: number;
  readonly logPath: string;
  alive(): boolean;
  /** The last `lines` lines of its log. */
  logTail(lines?: number): string;
  signal(signal: Deno.Signal): void;
  /** SIGSTOP, and resolves once every thread of it is stopped (a hung process). */
  pause(): Promise<void>;
  resume(): void;
  stop(): Promise<void>;
}

export function startRealProcess(
  name: string,
  command: string,
  args: string[],
  env: Record<string, string> = {},
): RealProcess {
  const logPath = Deno.makeTempFileSync({ prefix: `tidegate-${name}-`, suffix: ".log" });
  const log = Deno.openSync(logPath, { write: true, append: true });
  // setsid: its own process group, so stop() also reaches the engine's worker processes.
  const child = new Deno.Command("setsid", {
    args: [command, ...args],
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let exited = false;
  const status = child.status.then((s) => {
    exited = true;
    return s;
  });
  const pump = Promise.all(
    [child.stdout, child.stderr].map((stream) =>
      stream.pipeTo(new WritableStream({ write: (chunk) => void log.writeSync(chunk) }))
        .catch(() => {})
    ),
  ).finally(() => log.close());
  const group = (signal: Deno.Signal) => {
    try {
      Deno.kill(-child.pid, signal);
    } catch {
      // already gone
    }
  };
  return {
    pid: child.pid,
    logPath,
    alive: () => !exited,
    logTail(lines = 40) {
      try {
        return Deno.readTextFileSync(logPath).split("\n").slice(-lines).join("\n");
      } catch {
        return "";
      }
    },
    signal: group,
    async pause() {
      group("SIGSTOP");
      // A thread already running when the signal came may finish one more answer: wait until
      // the kernel shows every thread stopped.
      await eventually(() => allThreadsStopped(child.pid), 10_000, `${name} to stop`);
    },
    resume: () => group("SIGCONT"),
    async stop() {
      if (!exited) {
        group("SIGCONT");
        group("SIGTERM");
        const killer = setTimeout(() => group("SIGKILL"), 10_000);
        await status;
        clearTimeout(killer);
        group("SIGKILL"); // whatever the leader left behind
      }
      await pump;
    },
  };
}

/** Every thread of `pid` in state T (stopped), from /proc. */
function allThreadsStopped(pid: number): boolean {
  try {
    for (const task of Deno.readDirSync(`/proc/${pid}/task`)) {
      const stat = Deno.readTextFileSync(`/proc/${pid}/task/${task.name}/stat`);
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      if (state !== "T" && state !== "t") return false;
    }
    return true;
  } catch {
    return false;
  }
}

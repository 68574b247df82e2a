/** A router as users run it: `deno run -A cli/main.ts start --config FILE` in its own process. */

const ROOT = new URL("../../", import.meta.url).pathname;

export interface RouterProcess {
  url: string;
  /** Its process id (to read /proc/PID). */
  pid: number;
  /** Its stderr lines so far (JSON log lines), kept while it runs. */
  log: string[];
  /** Its stdout lines so far (it should print none). */
  out: string[];
  /** Sends a signal (e.g. SIGTERM, to watch the drain). */
  kill(signal: Deno.Signal): void;
  /** Resolves with the exit status when the process ends. */
  status: Promise<Deno.CommandStatus>;
  stop(): Promise<void>;
}

/** A router config in a temp folder of its own, listening on a free loopback port. */
export async function writeRouterConfig(
  config: Record<string, unknown>,
): Promise<{ path: string; remove(): Promise<void> }> {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/tidegate.json`;
  const listen = { host: "127.0.0.1", port: 0 };
  await Deno.writeTextFile(path, JSON.stringify({ listen, ...config }));
  return { path, remove: () => Deno.remove(dir, { recursive: true }) };
}

/**
 * Starts `cli/main.ts start` (with `args` after the config) and reads its bound URL from the
 * "tidegate listening" log line.
 */
export async function startRouterProcess(
  configPath: string,
  args: string[] = [],
): Promise<RouterProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "cli/main.ts", "start", "--config", configPath, ...args],
    cwd: ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out: string[] = [];
  const outDrained = linesOf(child.stdout, out).catch(() => {});
  const lines = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  const log: string[] = [];
  let buffered = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no listening line:\n${log.join("\n")}`)),
      // The router listens once its worker threads have loaded (seconds on a busy machine).
      60_000,
    );
    (async () => {
      for (;;) {
        const { value, done } = await lines.read();
        if (done) break;
        buffered += value;
        let newline;
        while ((newline = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, newline);
          buffered = buffered.slice(newline + 1);
          log.push(line);
          try {
            const entry = JSON.parse(line);
            if (entry.msg === "tidegate listening") {
              clearTimeout(timer);
              resolve(entry.url);
            }
          } catch {
            // not a JSON log line
          }
        }
      }
      clearTimeout(timer);
      reject(new Error(`router exited:\n${log.join("\n")}`));
    })().catch(reject);
  });
  // Keep draining stderr so the child never blocks on a full pipe.
  const drained = (async () => {
    for (;;) {
      const { value, done } = await lines.read();
      if (done) break;
      log.push(...value.split("\n").filter((line) => line !== ""));
    }
  })().catch(() => {});
  return {
    url,
    pid: child.pid,
    log,
    out,
    kill: (signal) => child.kill(signal),
    status: child.status,
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch {
        // already gone
      }
      const killer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await child.status;
      clearTimeout(killer);
      await Promise.all([drained, outDrained]);
    },
  };
}

/** Collects a stream's lines into `into` until it ends. */
async function linesOf(stream: ReadableStream<Uint8Array>, into: string[]): Promise<void> {
  let buffered = "";
  for await (const text of stream.pipeThrough(new TextDecoderStream())) {
    buffered += text;
    const lines = buffered.split("\n");
    buffered = lines.pop()!;
    into.push(...lines);
  }
  if (buffered !== "") into.push(buffered);
}

/**
 * Polls a router's `/healthz` from a process of its own, so the latencies it reports are the
 * router's and not those of the test process, busy with fake engines parsing 30 MB bodies.
 * `deno run -A health_watch_process.ts URL` polls until its stdin closes, then prints
 * `{answered, failed, slowestMs, p99Ms}` as one JSON line.
 */
const url = Deno.args[0];
let running = true;
const latencies: number[] = [];
let failed = 0;

const stdinClosed = (async () => {
  for await (const _ of Deno.stdin.readable) {
    // nothing is sent: only the end matters
  }
  running = false;
})();

while (running) {
  const started = performance.now();
  try {
    const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(30_000) });
    await response.body?.cancel();
    if (response.status === 200) latencies.push(performance.now() - started);
    else failed++;
  } catch {
    failed++;
  }
  await new Promise((resolve) => setTimeout(resolve, 10));
}
await stdinClosed;
const sorted = [...latencies].sort((a, b) => a - b);
console.log(JSON.stringify({
  answered: latencies.length,
  failed,
  slowestMs: sorted.at(-1) ?? 0,
  p99Ms: sorted[Math.floor(sorted.length * 0.99)] ?? 0,
}));

/**
 * What a store lookup's round trip costs the router: `deno task bench:master-get`. One
 * `MooncakeClient.lookup` of an 8k-token prompt's 32 keys against the fake master in a process of
 * its own (tests/bench/master_stub.ts), through Deno's `fetch` (the reference) and through the
 * router's kept-alive connections (src/kv/keep_alive_get.ts), alternately in the same run.
 * Prints this process's CPU (all its threads: `fetch` also works off the main one) and wall
 * time per lookup, the median of rounds.
 */
import { MooncakeClient } from "../../src/kv/mooncake_client.ts";
import { keepAliveGet } from "../../src/kv/keep_alive_get.ts";
import { takeNoArguments } from "./bench_arguments.ts";
import { benchKeys } from "./master_get_keys.ts";
import { loadAverage } from "./overhead/procs.ts";

const USAGE = `Usage: deno task bench:master-get

CPU and wall µs per store lookup (32 keys, one round trip to a fake master in another process)
through Deno's fetch (the reference) and through kept-alive connections, in the same run.`;

const LOOKUPS = 2_000;
const ROUNDS = 5;

takeNoArguments(USAGE);
const stub = new Deno.Command(Deno.execPath(), {
  args: ["run", "-A", new URL("./master_stub.ts", import.meta.url).pathname],
  stdin: "piped",
  stdout: "piped",
}).spawn();
const reader = stub.stdout.pipeThrough(new TextDecoderStream()).getReader();
const url = (await reader.read()).value!.trim();
const kept = keepAliveGet({ fallback: fetch });
const clients = {
  reference: new MooncakeClient({ url, fetch, deadlineMs: 1_000 }),
  now: new MooncakeClient({ url, fetch: kept.fetch, deadlineMs: 1_000 }),
};
const keys = benchKeys();
const samples: Record<keyof typeof clients, { cpu: number[]; wall: number[] }> = {
  reference: { cpu: [], wall: [] },
  now: { cpu: [], wall: [] },
};
try {
  for (const client of Object.values(clients)) await lookups(client, 200); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of ["reference", "now"] as const) {
      const [cpu0, wall0] = [cpuMs(), performance.now()];
      await lookups(clients[name], LOOKUPS);
      samples[name].cpu.push(((cpuMs() - cpu0) * 1000) / LOOKUPS);
      samples[name].wall.push(((performance.now() - wall0) * 1000) / LOOKUPS);
    }
  }
} finally {
  kept.close();
  await stub.stdin.close();
  await stub.status;
}
const [ref, now] = [samples.reference, samples.now];
console.log(`# bench:master-get, ${new Date().toISOString()}, load average ${loadAverage()}`);
console.log("| per lookup (32 keys) | Deno fetch µs | kept-alive µs | kept-alive ÷ fetch |");
console.log("|---|---:|---:|---:|");
for (const what of ["cpu", "wall"] as const) {
  const [a, b] = [median(ref[what]), median(now[what])];
  const label = what === "cpu" ? "CPU, all threads" : "wall, one at a time";
  console.log(`| ${label} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(b / a).toFixed(2)}× |`);
}

async function lookups(client: MooncakeClient, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const result = await client.lookup(keys);
    const present = [...result.locations.values()].filter((l) => l.present).length;
    if (present !== 16) throw new Error(`lookup found ${present} of the 16 keys stored`);
  }
}

/** This process's user + system CPU (ms), all threads; not procs.ts `cpuMs`, which adds the stub. */
function cpuMs(): number {
  const fields = Deno.readTextFileSync("/proc/self/stat").split(") ")[1].split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  return ticks * 10;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/**
 * What a soak watches in one process: its resident memory and its open file descriptors, read
 * from /proc (Linux). `pid` "self" is this process.
 */
export interface ProcessSample {
  rssBytes: number;
  openFds: number;
}

export async function sampleProcess(pid: number | "self" = "self"): Promise<ProcessSample> {
  return { rssBytes: await residentBytes(pid), openFds: await openFds(pid) };
}

/** VmRSS of /proc/PID/status, in bytes. */
export async function residentBytes(pid: number | "self"): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  if (!match) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(match[1]) * 1024;
}

/** Entries of /proc/PID/fd. */
export async function openFds(pid: number | "self"): Promise<number> {
  let count = 0;
  for await (const _ of Deno.readDir(`/proc/${pid}/fd`)) count++;
  return count;
}

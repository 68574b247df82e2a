/**
 * One engine's KV events as vLLM publishes them, collected by tests/real/kv_events_sub.py (bound
 * on a loopback endpoint the engine's publisher connects to), decoded by vLLM's own structs.
 */
import { freePort, REAL, requireRealPrograms } from "./real_env.ts";
import { waitFor } from "../support/eventually.ts";

export interface KvEvent {
  type: string;
  block_hashes?: string[];
  parent_block_hash?: string | null;
  token_ids?: number[];
  block_size?: number;
  medium?: string | null;
  extra_keys?: unknown;
}

export interface KvEventLog {
  /** The endpoint to give the engine (`kv-events-config.endpoint`). */
  readonly endpoint: string;
  readonly events: readonly KvEvent[];
  /** The hashes of every stored block so far, in order. */
  storedHashes(): string[];
  /** Waits until `found` returns a value, failing after `timeoutMs`. */
  waitFor<T>(found: (events: readonly KvEvent[]) => T | undefined, timeoutMs?: number): Promise<T>;
  close(): Promise<void>;
}

export async function startKvEventLog(): Promise<KvEventLog> {
  requireRealPrograms();
  const endpoint = `tcp://127.0.0.1:${freePort()}`;
  const child = new Deno.Command(REAL.python, {
    args: [new URL("./kv_events_sub.py", import.meta.url).pathname, endpoint],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const events: KvEvent[] = [];
  let ready: () => void;
  const isReady = new Promise<void>((resolve) => ready = resolve);
  const reading = (async () => {
    let buffered = "";
    for await (const text of child.stdout.pipeThrough(new TextDecoderStream())) {
      buffered += text;
      let at;
      while ((at = buffered.indexOf("\n")) >= 0) {
        const line = JSON.parse(buffered.slice(0, at));
        buffered = buffered.slice(at + 1);
        if (line.ready) ready!();
        else events.push(line);
      }
    }
  })();
  const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
  await Promise.race([isReady, reading.then(() => Promise.reject(new Error("subscriber exited")))]);
  clearTimeout(timer);
  return {
    endpoint,
    events,
    storedHashes: () =>
      events.filter((e) => e.type === "BlockStored").flatMap((e) => e.block_hashes ?? []),
    waitFor(found, timeoutMs = 30_000) {
      return waitFor(() => found(events), timeoutMs, () => `KV events (${events.length} seen)`);
    },
    async close() {
      await child.stdin.close().catch(() => {});
      const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await child.status;
      clearTimeout(killer);
      await reading.catch(() => {});
    },
  };
}

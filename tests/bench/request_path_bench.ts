/**
 * Two steps of the request path that the router-cost profile of issue 25 found heavy, each against
 * the implementation it replaced, measured in the same run: `deno task bench:request`.
 *
 * - depth guard: the byte-by-byte bracket scan every body went through (the reference, kept here)
 *   against `nestsDeeperThan` on the decoded text (a native `indexOf` count first), on an 8k-token
 *   completion body and a short chat; the decoding is counted on both sides.
 * - log sink: one `console.error` per access-log line (the reference) against the buffered stderr
 *   sink (src/telemetry/buffered_lines.ts: one write per event-loop turn), writing through a pipe
 *   as a router under a supervisor does: the bench runs that half in a child whose stderr it drains.
 *
 * Prints µs per call (median of rounds) and the ratio to the reference.
 */
import { nestsDeeperThan } from "../../src/openai/json_depth.ts";
import { createJsonLog } from "../../src/telemetry/json_log.ts";
import { takeNoArguments } from "./bench_arguments.ts";
import { microsPerCall } from "./micros_per_call.ts";

const USAGE = `Usage: deno task bench:request

µs per call of the JSON depth guard and of the access-log sink, each beside the implementation it
replaced, measured in the same run.`;

const ROUNDS = 15;

/** The guard as it was: every byte of the body, before decoding. */
function byteScanDeeperThan(bytes: Uint8Array, limit = 512): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (inString) {
      if (byte === 0x5c) i++;
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) inString = true;
    else if (byte === 0x5b || byte === 0x7b) {
      if (++depth > limit) return true;
    } else if (byte === 0x5d || byte === 0x7d) depth--;
  }
  return false;
}

const ACCESS_LINE = {
  level: "info",
  requestId: "0b5c3e1a-7f3a-4c2b-9a51-2f0c6d3e8b11",
  model: "qwen3",
  endpoint: "chat",
  stream: true,
  arm: "default",
  instance: "gpu-a",
  promptTokens: 8192,
  predictedHitTokens: 4096,
  engineCachedTokens: 4096,
  status: 200,
  outcome: "ok",
  ttftMs: 12.3,
  durationMs: 80.1,
  attempts: 1,
};

/** The child's half: per-line cost of each sink, 100 lines per event-loop turn. */
async function logChild(): Promise<void> {
  const buffered = createJsonLog("info");
  const consoleSink = createJsonLog("info", (line) => console.error(line));
  const result: Record<string, number> = {};
  for (const [name, log] of [["console.error", consoleSink], ["buffered", buffered]] as const) {
    const rounds: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const start = performance.now();
      for (let turn = 0; turn < 20; turn++) {
        for (let i = 0; i < 100; i++) log("request", ACCESS_LINE);
        await new Promise((resolve) => setTimeout(resolve, 0)); // the turn ends: the sink flushes
      }
      rounds.push(((performance.now() - start) * 1000) / 2000);
    }
    rounds.sort((a, b) => a - b);
    result[name] = rounds[Math.floor(rounds.length / 2)];
  }
  console.log(JSON.stringify(result));
}

async function logSinks(): Promise<Record<string, number>> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(import.meta.url).pathname, "--log-child"],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const [text, status] = await Promise.all([
    new Response(child.stdout).text(),
    child.status,
    child.stderr.pipeTo(new WritableStream()), // drained as a supervisor's pipe would be
  ]);
  if (!status.success) throw new Error(`the log child exited ${status.code}`);
  return JSON.parse(text);
}

function body(kind: "tokens8k" | "short"): Uint8Array {
  const value = kind === "tokens8k"
    ? {
      model: "qwen3",
      max_tokens: 1,
      prompt: Array.from({ length: 8192 }, (_, i) => (i * 7919) % 151_000),
    }
    : {
      model: "qwen3",
      max_tokens: 16,
      messages: [{ role: "user", content: "Say hello in French." }],
    };
  return new TextEncoder().encode(JSON.stringify(value));
}

if (Deno.args.includes("--log-child")) {
  await logChild();
} else {
  takeNoArguments(USAGE);
  const decoder = new TextDecoder();
  console.log("| step | input | reference µs | now µs | now ÷ reference |");
  console.log("|---|---|---:|---:|---:|");
  for (const kind of ["tokens8k", "short"] as const) {
    const bytes = body(kind);
    const calls = kind === "tokens8k" ? 200 : 20_000;
    const reference = microsPerCall(() => {
      byteScanDeeperThan(bytes);
      decoder.decode(bytes);
    }, calls);
    const now = microsPerCall(() => nestsDeeperThan(decoder.decode(bytes)), calls);
    console.log(
      `| depth guard + decode | ${kind} (${bytes.length} B) | ${reference.toFixed(2)} | ${
        now.toFixed(2)
      } | ${(now / reference).toFixed(2)}× |`,
    );
  }
  const sinks = await logSinks();
  console.log(
    `| access-log line to a pipe | 100 lines a turn | ${sinks["console.error"].toFixed(2)} | ${
      sinks.buffered.toFixed(2)
    } | ${(sinks.buffered / sinks["console.error"]).toFixed(2)}× |`,
  );
}

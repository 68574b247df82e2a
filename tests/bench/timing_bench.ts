/**
 * Wall-clock claims that unit tests check only as order of events (a hand-driven clock, a counter
 * for a clock): here they are measured on this machine's real clock, several times, and each
 * prints its median against the window it claims. A shared or loaded machine can miss a window;
 * that is a fact about the machine, which is why no test asserts it.
 *
 *     deno run -A tests/bench/timing_bench.ts [--rounds N]
 *
 * Exits 1 when a claim's median falls outside its window.
 */
import { EngineLoadPoller } from "../../src/cluster/engine_load_poller.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";

const at = Deno.args.indexOf("--rounds");
const ROUNDS = at >= 0 ? Number(Deno.args[at + 1]) : 9;
if (!(ROUNDS >= 1)) {
  console.error("usage: deno run -A tests/bench/timing_bench.ts [--rounds N]");
  Deno.exit(2);
}

interface Claim {
  name: string;
  /** The window the median must fall in, ms: [at least, under]. */
  window: [number, number];
  /** One measurement, ms. */
  measure(): Promise<number>;
}

/** Reads a response to its end. */
async function drain(response: Response): Promise<void> {
  await response.body?.pipeTo(new WritableStream());
}

const claims: Claim[] = [
  {
    // tests/fakes/fake_engine_test.ts: "decodes run concurrently".
    name: "fake engine: two concurrent streams of 10 tokens 5 ms apart take about one's time",
    window: [45, 85],
    async measure() {
      const engine = startFakeEngine({
        timeScale: 0.01,
        decodeSecondsPerToken: 0.5,
        countTokens: () => 1,
      });
      try {
        const started = performance.now();
        await Promise.all([0, 1].map(async () =>
          drain(
            await fetch(`${engine.url}/v1/completions`, {
              method: "POST",
              body: JSON.stringify({ prompt: "x", stream: true, max_tokens: 10 }),
            }),
          )
        ));
        return performance.now() - started;
      } finally {
        await engine.close();
      }
    },
  },
  {
    // tests/cluster/engine_load_poller_test.ts: "times out a hung engine without waiting on the
    // others".
    name: "load poller: a round with two hung engines (100 ms timeouts) ends after one timeout",
    window: [95, 190],
    async measure() {
      const hung = [startFakeEngine({ id: "h1" }), startFakeEngine({ id: "h2" })];
      const fine = startFakeEngine({ id: "fine", flavour: "sglang" });
      try {
        for (const engine of hung) await engine.setFailure("hang");
        const poller = new EngineLoadPoller({
          targets: () => [
            { id: "h1", url: hung[0].url, source: "vllm_metrics" },
            { id: "fine", url: fine.url, source: "sglang_get_load" },
            { id: "h2", url: hung[1].url, source: "vllm_metrics" },
          ],
          fetch,
          now: () => performance.now(),
          timeoutMs: 100,
          staleAfterMs: 1000,
        });
        const started = performance.now();
        await poller.pollOnce();
        return performance.now() - started;
      } finally {
        await Promise.all([...hung, fine].map((engine) => engine.close()));
      }
    },
  },
];

let missed = 0;
for (const claim of claims) {
  await claim.measure(); // warm-up
  const times: number[] = [];
  for (let i = 0; i < ROUNDS; i++) times.push(await claim.measure());
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  const [low, high] = claim.window;
  const holds = median >= low && median < high;
  if (!holds) missed++;
  console.log(
    `${holds ? "holds " : "MISSED"} ${claim.name}: median ${median.toFixed(1)} ms ` +
      `(window ${low}–${high} ms; ${times[0].toFixed(1)}–${times.at(-1)!.toFixed(1)} ms over ` +
      `${ROUNDS} rounds)`,
  );
}
if (missed > 0) Deno.exit(1);

/**
 * What reading an engine's load page costs the router, which polls every instance's page each
 * second whatever the traffic: `deno task bench:load-page`. A real vLLM 0.32.0 page
 * (tests/data/vllm_metrics.txt, 53 KB) read as the poller did before (the whole page cut into
 * lines and parsed, kept here as the reference) and as `readVllmMetrics` reads it now (only the
 * lines of the load gauges, src/cluster/engine_load.ts). Prints µs per read (median of
 * rounds) and the ratio to the reference.
 */
import { readVllmMetrics } from "../../src/cluster/engine_load.ts";
import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";
import { takeNoArguments } from "./bench_arguments.ts";
import { microsPerCall } from "./micros_per_call.ts";

const USAGE = `Usage: deno task bench:load-page

µs per read of a real vLLM /metrics page, the whole page parsed (the reference) against the
load lines only, measured in the same run.`;

const PAGE = Deno.readTextFileSync(new URL("../data/vllm_metrics.txt", import.meta.url));
const NAMES = new Set([
  "vllm:num_requests_waiting",
  "vllm:num_requests_running",
  "vllm:kv_cache_usage_perc",
  "vllm:gpu_cache_usage_perc",
]);
const CALLS = 500;

takeNoArguments(USAGE);
const reference = () => parsePrometheusText(PAGE, { keep: (name) => NAMES.has(name) }).samples;
const now = () => readVllmMetrics(PAGE, { observedAtMs: 0, modelName: "tiny-qwen3" });
if (reference().length !== 3 || now().runningRequests !== 0) throw new Error("unexpected page");
const before = microsPerCall(reference, CALLS);
const after = microsPerCall(now, CALLS);
console.log(`# bench:load-page, ${new Date().toISOString()}, load average ${loadAverage()}`);
console.log("| page | reference µs | now µs | now ÷ reference |");
console.log("|---|---:|---:|---:|");
console.log(
  `| vLLM 0.32.0 /metrics (${(PAGE.length / 1000).toFixed(0)} KB) | ${before.toFixed(1)} | ` +
    `${after.toFixed(1)} | ${(after / before).toFixed(2)}× |`,
);

function loadAverage(): string {
  return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
}

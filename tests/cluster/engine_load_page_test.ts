/**
 * Reading a real vLLM /metrics page (tests/data/vllm_metrics.txt, vLLM 0.32.0 CPU) by its few
 * load lines gives what the parse of the whole page gives.
 */
import { assertEquals } from "../assert.ts";
import { linesNamed, readVllmMetrics } from "../../src/cluster/engine_load.ts";
import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";

const PAGE = Deno.readTextFileSync(new URL("../data/vllm_metrics.txt", import.meta.url));
const NAMES = [
  "vllm:num_requests_waiting",
  "vllm:num_requests_waiting_by_reason",
  "vllm:num_requests_running",
  "vllm:kv_cache_usage_perc",
  "vllm:cache_config_info",
];

/** The page with each load gauge set to a value of its own. */
function pageWith(waiting: number, running: number, usage: number, deferred = 0): string {
  return PAGE
    .replace(/^(vllm:num_requests_waiting\{[^}]*\}) .*$/m, `$1 ${waiting}`)
    .replace(
      /^(vllm:num_requests_waiting_by_reason\{[^}]*reason="deferred"\}) .*$/m,
      `$1 ${deferred}`,
    )
    .replace(/^(vllm:num_requests_running\{[^}]*\}) .*$/m, `$1 ${running}`)
    .replace(/^(vllm:kv_cache_usage_perc\{[^}]*\}) .*$/m, `$1 ${usage}`);
}

const sorted = (text: string, keep: (name: string) => boolean) =>
  parsePrometheusText(text, { keep }).samples.map((s) => JSON.stringify(s)).sort();

Deno.test("the load lines of a real vLLM page parse to the samples the whole page gives", () => {
  const page = pageWith(3, 5, 0.25, 2);
  for (const names of [NAMES, ["vllm:num_requests_waiting"], ["vllm:prompt_tokens"]]) {
    const keep = (name: string) => names.includes(name);
    const whole = sorted(page, keep);
    assertEquals(sorted(linesNamed(page, names), keep), whole, names.join(","));
  }
  assertEquals(sorted(page, (name) => NAMES.includes(name)).length, 6);
  const report = readVllmMetrics(page, { observedAtMs: 7, modelName: "tiny-qwen3" });
  // The cache's size: its cache_config_info's kv_cache_size_tokens (16,384 blocks of 128).
  assertEquals(report, {
    waitingRequests: 3,
    runningRequests: 5,
    deferredWaitingRequests: 2,
    kvUsage: 0.25,
    kvCapacityTokens: 2_097_152,
    kvUsedTokens: 524_288,
    observedAtMs: 7,
  });
});

Deno.test("linesNamed() finds names first, quoted, last and in CRLF pages", () => {
  const page = 'a 1\r\n{"a",x="1"} 2\r\n# HELP a help\r\nb 3\r\na_total 4\r\na{x="2"} 5';
  assertEquals(
    linesNamed(page, ["a"]).split("\n").sort(),
    ["a 1\r", "a_total 4\r", 'a{x="2"} 5', '{"a",x="1"} 2\r'].sort(),
  );
  assertEquals(linesNamed(page, ["c"]), "");
  // One name beginning another: each line once, quoted ones included.
  const both = page + '\r\n{"a_total",x="3"} 6';
  assertEquals(
    linesNamed(both, ["a", "a_total"]).split("\n").sort(),
    linesNamed(both, ["a"]).split("\n").concat(['{"a_total",x="3"} 6']).sort(),
  );
});

Deno.test("an indented page is read whole, as the format allows", () => {
  const indented = pageWith(2, 1, 0.5).replace(/^vllm:num_requests_running/m, "  $&");
  const report = readVllmMetrics(indented, { observedAtMs: 0 });
  assertEquals([report.waitingRequests, report.runningRequests], [2, 1]);
});

import assert from "node:assert/strict";
import { parsePrometheusText, parsePromFloat } from "../../src/cluster/prometheus_text.ts";

Deno.test("parsePrometheusText() reads samples, labels and HELP/TYPE of colon-named metrics", () => {
  const text = [
    "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
    "# TYPE vllm:num_requests_waiting gauge",
    'vllm:num_requests_waiting{model_name="Qwen/Qwen3-8B",engine="0"} 3.0',
    'vllm:num_requests_waiting{model_name="Qwen/Qwen3-8B",engine="1"} 2',
    "process_open_fds 17",
    "",
  ].join("\n");
  const parsed = parsePrometheusText(text);
  assert.deepEqual(parsed.errors, []);
  assert.deepEqual(parsed.samples, [
    {
      name: "vllm:num_requests_waiting",
      labels: { model_name: "Qwen/Qwen3-8B", engine: "0" },
      value: 3,
    },
    {
      name: "vllm:num_requests_waiting",
      labels: { model_name: "Qwen/Qwen3-8B", engine: "1" },
      value: 2,
    },
    { name: "process_open_fds", labels: {}, value: 17 },
  ]);
  assert.deepEqual(parsed.families.get("vllm:num_requests_waiting"), {
    name: "vllm:num_requests_waiting",
    help: "Number of requests waiting to be processed.",
    type: "gauge",
  });
  assert.equal(parsed.openMetrics, false);
});

Deno.test("parsePrometheusText() unescapes backslash, quote and newline in label values and HELP", () => {
  const text = [
    String.raw`# HELP m A help with a \\ backslash and a \n newline`,
    String.raw`m{path="C:\\dir\\",quote="say \"hi\"",multi="a\nb",other="x\ty"} 1`,
  ].join("\n");
  const parsed = parsePrometheusText(text, { strict: true });
  assert.deepEqual(parsed.samples[0].labels, {
    path: "C:\\dir\\",
    quote: 'say "hi"',
    multi: "a\nb",
    other: "x\\ty", // an unknown escape is kept as written
  });
  assert.equal(parsed.families.get("m")?.help, "A help with a \\ backslash and a \n newline");
});

Deno.test("parsePrometheusText() reads NaN, +Inf, -Inf, exponents and millisecond timestamps", () => {
  const parsed = parsePrometheusText(
    [
      "a NaN",
      "b +Inf",
      "c -Inf 1700000000000",
      "d 1.5e-3",
      'e_bucket{le="+Inf"} 4 -5',
      "f .5",
    ].join("\n"),
    { strict: true },
  );
  const [a, b, c, d, e, f] = parsed.samples;
  assert.ok(Number.isNaN(a.value));
  assert.equal(b.value, Infinity);
  assert.equal(c.value, -Infinity);
  assert.equal(c.timestampMs, 1_700_000_000_000);
  assert.equal(d.value, 0.0015);
  assert.equal(e.labels.le, "+Inf");
  assert.equal(e.timestampMs, -5);
  assert.equal(f.value, 0.5);
  assert.equal(a.timestampMs, undefined);
});

Deno.test("parsePrometheusText() tolerates blanks, tabs, trailing commas, empty label sets and CRLF", () => {
  const parsed = parsePrometheusText(
    'm1 { a = "1" , b="2", }\t 7\r\nm2{} 8   \r\n   m3 9\r\n\r\n',
    { strict: true },
  );
  assert.deepEqual(parsed.samples, [
    { name: "m1", labels: { a: "1", b: "2" }, value: 7 },
    { name: "m2", labels: {}, value: 8 },
    { name: "m3", labels: {}, value: 9 },
  ]);
});

Deno.test("parsePrometheusText() reads OpenMetrics: exemplars ignored, seconds timestamps, stops at # EOF", () => {
  const text = [
    "# TYPE foo counter",
    "# UNIT foo seconds",
    "# HELP foo Foo.",
    'foo_total{a="b"} 17.0 1520879607.789 # {trace_id="KOO5S4vxi0o"} 0.67',
    'foo_bucket{le="0.1"} 8 # {trace_id="x"} 0.05 1520879607.7',
    "# EOF",
    "after_eof 1",
  ].join("\n");
  const parsed = parsePrometheusText(text, { strict: true });
  assert.equal(parsed.openMetrics, true);
  assert.equal(parsed.samples.length, 2);
  assert.deepEqual(parsed.samples[0], {
    name: "foo_total",
    labels: { a: "b" },
    value: 17,
    timestampMs: 1520879607789,
  });
  assert.equal(parsed.samples[1].value, 8);
  assert.equal(parsed.samples[1].timestampMs, undefined);
  assert.deepEqual(parsed.families.get("foo"), {
    name: "foo",
    type: "counter",
    unit: "seconds",
    help: "Foo.",
  });
});

Deno.test("parsePrometheusText() reads quoted UTF-8 metric and label names", () => {
  const parsed = parsePrometheusText(
    [
      '# HELP "my.metric" Dotted.',
      '{"my.metric","label.with.dots"="v",plain="w"} 2',
      'named{"quoted label"="x"} 3',
    ].join("\n"),
    { strict: true },
  );
  assert.deepEqual(parsed.samples, [
    { name: "my.metric", labels: { "label.with.dots": "v", plain: "w" }, value: 2 },
    { name: "named", labels: { "quoted label": "x" }, value: 3 },
  ]);
  assert.equal(parsed.families.get("my.metric")?.help, "Dotted.");
});

Deno.test("parsePrometheusText() reports malformed lines with their numbers and keeps the rest", () => {
  const text = [
    "good 1",
    "bad_value abc",
    'unterminated{a="x} 1',
    "no_value",
    'dup{a="1",a="2"} 1',
    "9starts_with_digit 1",
    "trailing 1 2 3",
    "# TYPE t sometype",
    "also_good 2",
  ].join("\n");
  const parsed = parsePrometheusText(text);
  assert.deepEqual(parsed.samples.map((s) => s.name), ["good", "also_good"]);
  assert.deepEqual(parsed.errors.map((e) => e.line), [2, 3, 4, 5, 6, 7, 8]);
  assert.match(parsed.errors[0].message, /not a number/);
  assert.match(parsed.errors[3].message, /duplicate label "a"/);
  assert.throws(() => parsePrometheusText(text, { strict: true }), /line 2: not a number/);
});

Deno.test("parsePrometheusText() skips unwanted families cheaply with keep()", () => {
  const parsed = parsePrometheusText('wanted 1\nunwanted{broken="} 2\nwanted 3', {
    keep: (name) => name === "wanted",
  });
  assert.deepEqual(parsed.samples.map((s) => s.value), [1, 3]);
  assert.deepEqual(parsed.errors, [], "a skipped line is not even checked");
});

Deno.test("a label named __proto__ is an ordinary label", () => {
  const parsed = parsePrometheusText('m{__proto__="x",constructor="y"} 1', { strict: true });
  const labels = parsed.samples[0].labels;
  assert.equal(Object.getPrototypeOf(labels), Object.prototype);
  assert.deepEqual(Object.keys(labels), ["__proto__", "constructor"]);
  assert.equal(labels["__proto__"], "x");
});

Deno.test("parsePromFloat() accepts Prometheus spellings and rejects the rest", () => {
  assert.equal(parsePromFloat("+inf"), Infinity);
  assert.equal(parsePromFloat("-Inf"), -Infinity);
  assert.ok(Number.isNaN(parsePromFloat("nan")));
  assert.equal(parsePromFloat("-1.5E+2"), -150);
  for (const bad of ["", "1,5", "0x10", "1e", "--1", "Infinite"]) {
    assert.throws(() => parsePromFloat(bad), /not a number/, bad);
  }
});

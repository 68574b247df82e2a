/**
 * The monitoring kit in deploy/monitoring: the alerting rules pass `promtool check rules` and
 * their unit tests (`promtool test rules`), the scrape config and the dashboard's queries are
 * valid PromQL/config for promtool, the Grafana dashboard is well formed, and every metric
 * (and label) the rules, their tests and the dashboard name is one a real router exposes on
 * /metrics. promtool comes from Debian's `prometheus` package; without it the promtool test is
 * ignored (failing in CI: tests/support/needs_tool.ts).
 */
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { assert, assertEquals } from "../assert.ts";
import { commandMissing, testNeeding } from "../support/needs_tool.ts";
import { completion, range, startTestCluster } from "../support/harness.ts";

const DIR = new URL("../../deploy/monitoring/", import.meta.url);
const path = (name: string) => new URL(name, DIR).pathname;

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: { refId: string; expr: string; datasource?: { uid: string } }[];
  panels?: Panel[];
}
interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: Panel[];
  templating: { list: { name: string; type: string; query: unknown }[] };
}

function rules(): Rule[] {
  const file = parseYaml(Deno.readTextFileSync(path("alerts.yaml"))) as {
    groups: { name: string; rules: Rule[] }[];
  };
  return file.groups.flatMap((g) => g.rules);
}

function dashboard(): Dashboard {
  return JSON.parse(Deno.readTextFileSync(path("grafana-dashboard.json")));
}

/** Every panel, rows' nested panels included. */
function allPanels(d: Dashboard): Panel[] {
  return d.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** Queries with Grafana's variables replaced by what Prometheus would receive. */
function dashboardExprs(d: Dashboard): string[] {
  return allPanels(d).flatMap((p) => p.targets ?? []).map((t) =>
    t.expr.replaceAll("$__rate_interval", "1m").replaceAll("$__range", "1h")
      .replaceAll(/\$\{?(model|instance|router)\}?/g, ".*")
  );
}

function unitTestSeries(): string[] {
  const file = parseYaml(Deno.readTextFileSync(path("alerts_test.yaml"))) as {
    tests: { input_series: { series: string }[] }[];
  };
  return file.tests.flatMap((t) => t.input_series.map((s) => s.series));
}

async function promtool(...args: string[]): Promise<{ ok: boolean; out: string }> {
  const { success, stdout, stderr } = await new Deno.Command("promtool", {
    args,
    cwd: DIR.pathname,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { ok: success, out: decode(stdout) + decode(stderr) };
}

Deno.test("every alert says what it means and what to do, and names its section of docs/operations.md", () => {
  const guide = Deno.readTextFileSync(new URL("../../docs/operations.md", import.meta.url));
  const headings = new Set(
    [...guide.matchAll(/^#{2,4} (.+)$/gm)].map((m) =>
      m[1].toLowerCase().replaceAll(/[^a-z0-9 _-]/g, "").replaceAll(" ", "-")
    ),
  );
  const alerts = rules().filter((r) => r.alert);
  assert(alerts.length >= 10, `only ${alerts.length} alerts`);
  for (const rule of alerts) {
    assert(["critical", "warning"].includes(rule.labels?.severity ?? ""), `${rule.alert} severity`);
    assert((rule.annotations?.summary ?? "").length > 10, `${rule.alert} has no summary`);
    assert((rule.annotations?.description ?? "").length > 80, `${rule.alert} has no description`);
    const anchor = rule.annotations?.runbook?.split("#")[1];
    assertEquals(anchor, rule.alert!.toLowerCase(), `${rule.alert}'s runbook anchor`);
    assert(headings.has(anchor!), `docs/operations.md has no heading for ${rule.alert}`);
  }
});

testNeeding(await commandMissing("promtool", ["--version"], "apt-get install -y prometheus"), {
  name:
    "promtool: the rules check, each rule's unit tests pass, the scrape config and the dashboard's queries are valid",
  fn: async () => {
    const check = await promtool("check", "rules", "alerts.yaml");
    assert(check.ok, check.out);
    assertEquals(check.out.match(/SUCCESS: (\d+) rules found/)?.[1], String(rules().length));

    const tested = await promtool("test", "rules", "alerts_test.yaml");
    assert(tested.ok, tested.out);
    // Every alert has a case that fires it and one where it stays silent.
    const cases = (parseYaml(Deno.readTextFileSync(path("alerts_test.yaml"))) as {
      tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
    }).tests.flatMap((t) => t.alert_rule_test);
    for (const rule of rules().filter((r) => r.alert)) {
      const own = cases.filter((c) => c.alertname === rule.alert);
      assert(own.some((c) => c.exp_alerts.length > 0), `no test fires ${rule.alert}`);
      assert(own.some((c) => c.exp_alerts.length === 0), `no test keeps ${rule.alert} silent`);
    }

    const config = await promtool("check", "config", "prometheus.yaml");
    assert(config.ok, config.out);

    // The dashboard's queries, as recording rules, through promtool's PromQL parser.
    const dir = await Deno.makeTempDir();
    try {
      const exprs = dashboardExprs(dashboard());
      const file = `${dir}/dashboard_queries.yaml`;
      await Deno.writeTextFile(
        file,
        stringifyYaml({
          groups: [{
            name: "dashboard",
            rules: exprs.map((expr, i) => ({ record: `dashboard:query_${i}`, expr })),
          }],
        }),
      );
      const parsed = await promtool("check", "rules", file);
      assert(parsed.ok, parsed.out);
      assertEquals(parsed.out.match(/SUCCESS: (\d+) rules found/)?.[1], String(exprs.length));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("the Grafana dashboard is well formed: a datasource variable, every panel queries it, no overlaps", () => {
  const d = dashboard();
  assertEquals(d.uid, "tidegate-router");
  assert(d.schemaVersion >= 36);
  const vars = new Map(d.templating.list.map((v) => [v.name, v]));
  assertEquals(vars.get("datasource")?.type, "datasource");
  assertEquals(vars.get("datasource")?.query, "prometheus");
  const panels = allPanels(d);
  assertEquals(new Set(panels.map((p) => p.id)).size, panels.length, "panel ids are unique");
  const queried = panels.filter((p) => p.type !== "row");
  assert(queried.length >= 20, `${queried.length} panels`);
  for (const panel of queried) {
    assertEquals(panel.datasource?.uid, "${datasource}", `${panel.title}'s datasource`);
    assert((panel.targets ?? []).length > 0, `${panel.title} has no targets`);
    for (const target of panel.targets!) {
      assert(target.expr.includes("tidegate_"), `${panel.title}: ${target.expr}`);
      assertEquals(target.datasource?.uid, "${datasource}");
    }
    const { x, w } = panel.gridPos;
    assert(x >= 0 && w > 0 && x + w <= 24, `${panel.title} fits the 24-column grid`);
  }
  // No two panels share a grid cell.
  const cells = new Set<string>();
  for (const { gridPos: g, title } of panels) {
    for (let dx = 0; dx < g.w; dx++) {
      for (let dy = 0; dy < g.h; dy++) {
        const cell = `${g.x + dx},${g.y + dy}`;
        assert(!cells.has(cell), `${title} overlaps another panel at ${cell}`);
        cells.add(cell);
      }
    }
  }
  // What the issue asks the dashboard to show.
  const all = queried.flatMap((p) => p.targets!.map((t) => t.expr)).join("\n");
  for (
    const wanted of [
      /histogram_quantile\([^)]*by \(le, arm\) \(rate\(tidegate_ttft_seconds_bucket/,
      /histogram_quantile\([^)]*by \(le, instance\) \(rate\(tidegate_ttft_seconds_bucket/,
      /tidegate_predicted_hit_tokens_total/,
      /tidegate_engine_cached_tokens_total/,
      /tidegate_store_lookups_total/,
      /tidegate_store_down/,
      /tidegate_instance_breaker_state/,
      /tidegate_stage_seconds_bucket/,
      /tidegate_admission_rejections_total/,
      /tidegate_requests_in_flight/,
    ]
  ) assert(wanted.test(all), `the dashboard does not show ${wanted}`);
});

/** `name{a="x",b=~"y"}` selectors in PromQL (or a promtool series): name → label names used. */
function selectors(text: string): { name: string; labels: [string, string, string][] }[] {
  const found = [];
  for (const m of text.matchAll(/\b(tidegate_[a-z0-9_]+)(\{([^}]*)\})?/g)) {
    const labels = [...(m[3] ?? "").matchAll(/([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"/g)]
      .map((l) => [l[1], l[2], l[3]] as [string, string, string]);
    found.push({ name: m[1], labels });
  }
  return found;
}

/** Labels Prometheus adds at scrape time (prometheus.yaml), not the router. */
const SCRAPE_LABELS = new Set(["router", "job"]);

Deno.test("every metric and label the rules, their tests and the dashboard use is one a running router exposes", async () => {
  const t = await startTestCluster({ engines: 2 });
  try {
    for (const stream of [false, true]) {
      const response = await completion(t.url, { prompt: range(1, 64), stream, max_tokens: 3 });
      assertEquals(response.status, 200);
      await response.text();
    }
    const text = await (await fetch(`${t.url}/metrics`)).text();
    // Families (# TYPE), with a histogram's series; and the labels each series carries.
    const types = new Map(
      [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]),
    );
    const series = new Map<string, Set<string>>();
    for (const [name, type] of types) {
      const names = type === "histogram"
        ? [`${name}_bucket`, `${name}_sum`, `${name}_count`]
        : [name];
      for (const n of names) series.set(n, new Set());
    }
    const values = new Map<string, Set<string>>(); // "series label" → values seen
    for (const m of text.matchAll(/^(tidegate_[a-z0-9_]+)\{([^}]*)\}/gm)) {
      for (const l of m[2].matchAll(/([a-z_]+)="([^"]*)"/g)) {
        series.get(m[1])?.add(l[1]);
        const key = `${m[1]} ${l[1]}`;
        values.set(key, (values.get(key) ?? new Set()).add(l[2]));
      }
    }
    // Label names of every family, also of those with no sample yet (prom-client's registry).
    const declared = new Map(
      t.router.metrics.registry.getMetricsAsArray().map((metric) => {
        const m = metric as unknown as { name: string; labelNames?: string[] };
        return [m.name, new Set(m.labelNames ?? [])];
      }),
    );
    const labelsOf = (name: string) => {
      const family = name.replace(/_(bucket|sum|count)$/, "");
      const labels = new Set(declared.get(name) ?? declared.get(family) ?? []);
      if (name.endsWith("_bucket")) labels.add("le");
      return labels;
    };

    const sources = [
      ...rules().map((r) => ({ where: `alerts.yaml ${r.alert ?? r.record}`, text: r.expr })),
      ...unitTestSeries().map((s) => ({ where: "alerts_test.yaml", text: s })),
      ...dashboardExprs(dashboard()).map((e) => ({ where: "grafana-dashboard.json", text: e })),
    ];
    const used = new Set<string>();
    for (const source of sources) {
      const found = selectors(source.text);
      assert(found.length > 0, `${source.where}: no tidegate_ series in ${source.text}`);
      for (const { name, labels } of found) {
        used.add(name);
        assert(series.has(name), `${source.where}: ${name} is not on /metrics`);
        for (const [label, op, value] of labels) {
          if (SCRAPE_LABELS.has(label)) continue;
          assert(labelsOf(name).has(label), `${source.where}: ${name} has no label ${label}`);
          // Gauges read at scrape time list every state (breaker, KV agreement): a literal
          // state must be one of them. (model and instance are the test's own names.)
          const seen = values.get(`${name} ${label}`);
          const identity = label === "model" || label === "instance";
          if (op === "=" && types.get(name) === "gauge" && seen && !identity) {
            assert(seen.has(value), `${source.where}: ${name}{${label}="${value}"} never appears`);
          }
        }
      }
    }
    // Sanity of the check itself: it saw the series the kit is about.
    for (
      const name of [
        "tidegate_ttft_seconds_bucket",
        "tidegate_kv_agreement",
        "tidegate_hit_mismatch_tokens_total",
        "tidegate_instance_breaker_state",
        "tidegate_store_down",
        "tidegate_admission_rejections_total",
      ]
    ) assert(used.has(name), `${name} is not used`);
  } finally {
    await t.close();
  }
});

// @ts-check
/// <reference lib="dom" />
/**
 * The dashboard page's script (served as /dashboard/app.js, no build step): polls
 * `dashboard/data` once a second and redraws tables and hand-drawn SVG charts. Every string from
 * the data goes in through textContent/setAttribute, never innerHTML. Formatting and chart
 * geometry live in dashboard_view.js (pure, unit-tested); the page starts itself in a browser.
 */

import {
  ARM_COLORS,
  formatClock,
  formatInteger,
  formatRatio,
  formatSeconds,
  formatTerm,
  niceCeiling,
  ttftChartGeometry,
} from "./dashboard_view.js";

/** @typedef {import("./dashboard_view.js").TtftSnapshot} TtftSnapshot */

const SVG_NS = "http://www.w3.org/2000/svg";
const REFRESH_MS = 1000;
const FETCH_TIMEOUT_MS = 5000;

// ---------------------------------------------------------------- DOM helpers

/**
 * An element with attributes (null/undefined skipped) and children (strings become text nodes).
 * @param {Document} doc
 * @param {string} tag
 * @param {Record<string, unknown>} [attrs]
 * @param {(Node | string)[]} [children]
 */
function h(doc, tag, attrs = {}, children = []) {
  const node = doc.createElement(tag);
  setAttributes(node, attrs);
  node.append(...children);
  return node;
}

/**
 * @param {Document} doc
 * @param {string} tag
 * @param {Record<string, unknown>} [attrs]
 * @param {(Node | string)[]} [children]
 */
function svg(doc, tag, attrs = {}, children = []) {
  const node = doc.createElementNS(SVG_NS, tag);
  setAttributes(node, attrs);
  node.append(...children);
  return node;
}

/** @param {Element} node @param {Record<string, unknown>} attrs */
function setAttributes(node, attrs) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined) node.setAttribute(name, String(value));
  }
}

/**
 * A table cell the browser test can read: `data-field` names it, `data-value` holds the raw
 * number (empty when unknown), the text is formatted.
 * @param {Document} doc
 * @param {string} field
 * @param {number | null | undefined} value
 * @param {string} text
 */
function numberCell(doc, field, value, text) {
  return h(doc, "td", {
    class: "num",
    "data-field": field,
    "data-value": value === null || value === undefined ? "" : value,
  }, [text]);
}

/**
 * A header row; a label given as [short, long] shows the short text with the long one as its
 * tooltip (compact columns for a 1280 px screen).
 * @param {Document} doc @param {(string | [string, string])[]} labels @param {number[]} [numeric]
 */
function headerRow(doc, labels, numeric = []) {
  return h(
    doc,
    "tr",
    {},
    labels.map((label, i) => {
      const [text, title] = Array.isArray(label) ? label : [label, undefined];
      return h(doc, "th", { class: numeric.includes(i) ? "num" : undefined, title }, [text]);
    }),
  );
}

// ---------------------------------------------------------------- sections

/** @param {Document} doc @param {any} model @param {TtftSnapshot} ttft */
function modelCard(doc, model, ttft) {
  const totals = model.totals;
  const title = h(doc, "h2", {}, [
    model.name,
    " ",
    model.experiment ? experimentBadge(doc, model.experiment) : h(doc, "span", {
      class: "policy",
      "data-field": "policy",
      "data-value": model.policy,
    }, [`policy ${model.policy}`]),
    " ",
    h(doc, "span", { class: "muted" }, [
      `tokenizer ${model.tokenizer} · ` +
      `${totals.healthyInstances}/${model.instances.length} healthy · ` +
      `${formatInteger(totals.requests)} requests · predicted hit ratio ` +
      formatRatio(totals.predictedHitRatio) + " · ",
    ]),
    queueBadge(doc, model.queue),
  ]);
  const left = h(doc, "div", {}, [
    h(doc, "h3", {}, ["TTFT per arm (p50 solid, p90 dashed, p99 dotted)"]),
    ttftChart(doc, model.name, ttft),
  ]);
  const right = h(doc, "div", {}, [
    h(doc, "h3", {}, ["Load: waiting prefill tokens"]),
    loadBars(doc, model),
    h(doc, "h3", {}, ["KV store"]),
    storePanel(doc, model),
  ]);
  return h(doc, "section", { class: "card", "data-model": model.name }, [
    title,
    h(doc, "h3", {}, ["Instances"]),
    h(doc, "div", { class: "scroll" }, [instancesTable(doc, model)]),
    h(doc, "div", { class: "grid" }, [left, right]),
  ]);
}

/**
 * Requests waiting in the model's flow-control queue, each band's count in the title.
 * @param {Document} doc
 * @param {{waiting: number, bands: {priority: number, waiting: number}[]} | undefined} data
 */
function queueBadge(doc, data) {
  const queue = data ?? { waiting: 0, bands: [] };
  const bands = queue.bands.map((b) => `band ${b.priority}: ${formatInteger(b.waiting)}`);
  return h(doc, "span", {
    class: queue.waiting > 0 ? "queue waiting" : "queue muted",
    "data-field": "queued",
    "data-value": queue.waiting,
    title: bands.length > 0 ? bands.join(", ") : "nobody waits in the flow-control queue",
  }, [`${formatInteger(queue.waiting)} queued`]);
}

/**
 * The running experiment in the model's header: every arm's name, policy and share of keys.
 * @param {Document} doc
 * @param {any} experiment
 */
function experimentBadge(doc, experiment) {
  return h(doc, "span", {
    class: "experiment",
    "data-field": "experiment",
    "data-version": experiment.version,
    title: `A/B experiment v${experiment.version}, assigned by ${experiment.key}; ` +
      "share: the arm's weight over the total",
  }, [
    `experiment (by ${experiment.key}): `,
    ...experiment.arms.flatMap((/** @type {any} */ arm, /** @type {number} */ i) => [
      i ? " vs " : "",
      h(doc, "span", {
        class: "arm",
        "data-arm": arm.name,
        "data-policy": arm.policy,
        "data-share": arm.share,
      }, [`${arm.name} ${arm.policy} ${Math.round(arm.share * 100)} %`]),
    ]),
  ]);
}

/** @param {Document} doc @param {any} model */
function instancesTable(doc, model) {
  const head = headerRow(doc, [
    ["instance", "instance · engine · role (the URL on hover)"],
    ["health", "health · circuit breaker"],
    ["waiting tok", "waiting prefill tokens: the reconciled load the policies see"],
    ["running", "running requests"],
    ["active", "requests proxied to it right now"],
    "requests",
    ["prompt tok", "prompt tokens dispatched to it"],
    [
      "hit pred.",
      "hit ratio predicted by the router from the instance's own prefix (local prefix tokens / prompt tokens); engines that load from the store themselves (kv.poolLoads) reuse more",
    ],
    [
      "hit engine",
      "hit ratio the engine reported (cached tokens / prompt tokens of the requests with usage)",
    ],
    ["KV agree", "KV agreement of predicted hits and engine reuse (counts on hover)"],
    ["TTFT p50", "time to first token, recent requests, median"],
    ["TTFT p90", "time to first token, recent requests, 90th percentile"],
    ["engine report", "the engine's own queue report: waiting, running, age"],
  ], [2, 3, 4, 5, 6, 7, 8, 10, 11]);
  const rows = model.instances.map((/** @type {any} */ i) => {
    const health = i.draining ? "draining" : i.healthy ? "healthy" : "unhealthy";
    const report = i.engineReport;
    const reportText = report
      ? `${report.usable ? "" : "stale · "}${formatInteger(report.waitingRequests)} waiting · ` +
        `${formatInteger(report.runningRequests)} running · ${report.ageS.toFixed(1)} s ago`
      : i.engineReportError
      ? `error: ${i.engineReportError}`
      : "–";
    return h(doc, "tr", { "data-model": model.name, "data-instance": i.id }, [
      h(doc, "td", { title: i.url }, [
        h(doc, "span", { "data-field": "id" }, [i.id]),
        h(doc, "span", { class: "sub", "data-field": "engine" }, [`${i.engine} · ${i.role}`]),
      ]),
      h(doc, "td", {}, [
        h(
          doc,
          "span",
          { "data-field": "health", "data-value": health, class: `health-${health}` },
          [
            `● ${health}`,
          ],
        ),
        h(doc, "span", {
          class: "sub",
          "data-field": "breaker",
          "data-value": i.breaker,
          title: "circuit breaker",
        }, [`breaker ${i.breaker}`]),
      ]),
      numberCell(
        doc,
        "waiting-prefill-tokens",
        i.waitingPrefillTokens,
        formatInteger(i.waitingPrefillTokens),
      ),
      numberCell(doc, "running-requests", i.runningRequests, formatInteger(i.runningRequests)),
      numberCell(doc, "active", i.active, formatInteger(i.active)),
      numberCell(doc, "requests", i.requests, formatInteger(i.requests)),
      numberCell(doc, "prompt-tokens", i.promptTokens, formatInteger(i.promptTokens)),
      numberCell(doc, "hit-ratio", i.predictedHitRatio, formatRatio(i.predictedHitRatio)),
      numberCell(doc, "engine-hit-ratio", i.engineHitRatio, formatRatio(i.engineHitRatio)),
      agreementCell(doc, i.kvAgreement),
      numberCell(doc, "ttft-p50", i.recentTtft.p50, formatSeconds(i.recentTtft.p50)),
      numberCell(doc, "ttft-p90", i.recentTtft.p90, formatSeconds(i.recentTtft.p90)),
      h(doc, "td", { "data-field": "report", class: "muted wrap" }, [reportText]),
    ]);
  });
  return h(doc, "table", { "data-table": "instances" }, [
    h(doc, "thead", {}, [head]),
    h(doc, "tbody", {}, rows),
  ]);
}

/**
 * The instance's KV agreement state, its window's counts in the tooltip.
 * @param {Document} doc
 * @param {any} agreement
 */
function agreementCell(doc, agreement) {
  const state = agreement?.state ?? "unknown";
  const title = agreement
    ? `${agreement.samples} samples: ${agreement.agree} agree, ${agreement.over} over, ` +
      `${agreement.blind} blind`
    : "no samples";
  return h(doc, "td", {
    "data-field": "kv-agreement",
    "data-value": state,
    class: `agreement-${state}`,
    title,
  }, [state]);
}

/**
 * Horizontal bars of the waiting prefill tokens the policies see, with running requests.
 * @param {Document} doc
 * @param {any} model
 */
function loadBars(doc, model) {
  const rowH = 26;
  const width = 420;
  const labelW = 90;
  const valueW = 150;
  const instances = model.instances;
  const max = niceCeiling(
    Math.max(1, ...instances.map((/** @type {any} */ i) => i.waitingPrefillTokens)),
  );
  const height = Math.max(1, instances.length) * rowH + 18;
  const plotW = width - labelW - valueW;
  const children = instances.flatMap((/** @type {any} */ i, /** @type {number} */ n) => {
    const y = n * rowH + 4;
    const w = Math.max(1, (i.waitingPrefillTokens / max) * plotW);
    return [
      svg(doc, "text", { x: 0, y: y + 14, class: "label" }, [i.id]),
      svg(doc, "rect", {
        x: labelW,
        y,
        width: Math.round(w * 10) / 10,
        height: rowH - 10,
        rx: 2,
        class: i.healthy ? "bar" : "bar unhealthy",
        "data-instance": i.id,
        "data-value": i.waitingPrefillTokens,
      }),
      svg(doc, "text", { x: labelW + plotW + 6, y: y + 14 }, [
        `${formatInteger(i.waitingPrefillTokens)} tok · ${
          formatInteger(i.runningRequests)
        } running`,
      ]),
    ];
  });
  children.push(
    svg(doc, "line", { x1: labelW, x2: labelW, y1: 0, y2: height - 14, class: "axis" }),
    svg(doc, "text", { x: labelW, y: height - 2 }, ["0"]),
    svg(doc, "text", { x: labelW + plotW, y: height - 2, "text-anchor": "end" }, [
      formatInteger(max),
    ]),
  );
  return svg(doc, "svg", {
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: "img",
    "aria-label": "waiting prefill tokens per instance",
    "data-chart": "load",
  }, children);
}

/** @param {Document} doc @param {any} model */
function storePanel(doc, model) {
  const store = model.store;
  /** @type {[string, string, string, unknown][]} label, field, text, raw value */
  const rows = [];
  if (!store) {
    rows.push(["store", "store-state", "none (dispatch by load and local predictions)", "none"]);
  } else {
    rows.push(["state", "store-state", store.state, store.state]);
    rows.push(["url", "store-url", store.url, store.url]);
    if (store.downForS !== null) {
      rows.push(["down for", "store-down-for", formatSeconds(store.downForS), store.downForS]);
    }
    for (const [name, value] of Object.entries(store.counters)) {
      rows.push([name, `store-${name}`, formatInteger(/** @type {number} */ (value)), value]);
    }
    if (store.lastError) {
      rows.push(["last error", "store-last-error", store.lastError, store.lastError]);
    }
  }
  rows.push([
    "predicted index keys",
    "predicted-index-keys",
    formatInteger(model.predictedIndexKeys),
    model.predictedIndexKeys,
  ]);
  return h(
    doc,
    "dl",
    { class: "store", "data-model": model.name },
    rows.flatMap(([label, field, text, value]) => [
      h(doc, "dt", {}, [label]),
      h(doc, "dd", {
        "data-field": field,
        "data-value": value,
        class: field === "store-state" ? `state-${value}` : undefined,
      }, [text]),
    ]),
  );
}

/** @param {Document} doc @param {string} modelName @param {TtftSnapshot} ttft */
function ttftChart(doc, modelName, ttft) {
  const series = ttft.series.filter((s) => s.model === modelName);
  const size = { width: 720, height: 220, margin: { top: 10, right: 12, bottom: 22, left: 56 } };
  const geometry = ttftChartGeometry(series, ttft, size);
  if (!geometry) {
    return h(doc, "p", { class: "muted", "data-chart": "ttft", "data-empty": "true" }, [
      `No requests with a first token in the last ${Math.round(ttft.windowMs / 60_000)} minutes.`,
    ]);
  }
  const { width, height, margin } = size;
  const children = [
    ...geometry.yTicks.flatMap((tick) => [
      svg(doc, "line", {
        x1: margin.left,
        x2: width - margin.right,
        y1: tick.y,
        y2: tick.y,
        class: "axis",
      }),
      svg(doc, "text", { x: margin.left - 6, y: tick.y + 4, "text-anchor": "end" }, [tick.label]),
    ]),
    ...geometry.xTicks.map((tick, i) =>
      svg(doc, "text", {
        x: tick.x,
        y: height - 6,
        "text-anchor": i === 0 ? "start" : i === geometry.xTicks.length - 1 ? "end" : "middle",
      }, [tick.label])
    ),
    ...geometry.lines.flatMap((line) => [
      svg(doc, "path", {
        d: line.d,
        fill: "none",
        stroke: line.color,
        "stroke-width": line.quantile === "p50" ? 2 : 1.5,
        "stroke-dasharray": line.dash || undefined,
        "data-arm": line.arm,
        "data-quantile": line.quantile,
      }),
      ...line.points.map((p) => svg(doc, "circle", { cx: p.x, cy: p.y, r: 2, fill: line.color })),
    ]),
  ];
  const chart = svg(doc, "svg", {
    viewBox: `0 0 ${width} ${height}`,
    width: "100%",
    role: "img",
    "aria-label": `TTFT percentiles per arm for ${modelName}`,
    "data-chart": "ttft",
  }, children);
  const summary = h(doc, "table", { "data-table": "ttft-summary" }, [
    h(doc, "thead", {}, [
      headerRow(doc, ["arm", "requests (window)", "p50", "p90", "p99"], [1, 2, 3, 4]),
    ]),
    h(
      doc,
      "tbody",
      {},
      series.map((s, index) => {
        const w = s.window;
        return h(doc, "tr", { "data-arm": s.arm }, [
          h(doc, "td", {}, [
            svg(doc, "svg", { width: 10, height: 10 }, [
              svg(doc, "rect", {
                width: 10,
                height: 10,
                fill: ARM_COLORS[index % ARM_COLORS.length],
              }),
            ]),
            ` ${s.arm}`,
          ]),
          numberCell(doc, "count", w?.count, formatInteger(w?.count)),
          numberCell(doc, "p50", w?.p50, formatSeconds(w?.p50)),
          numberCell(doc, "p90", w?.p90, formatSeconds(w?.p90)),
          numberCell(doc, "p99", w?.p99, formatSeconds(w?.p99)),
        ]);
      }),
    ),
  ]);
  return h(doc, "div", {}, [chart, summary]);
}

/** @param {Document} doc @param {any[]} decisions */
function decisionsTable(doc, decisions) {
  if (decisions.length === 0) {
    return h(doc, "p", { class: "muted", "data-table": "decisions", "data-empty": "true" }, [
      "No decisions yet.",
    ]);
  }
  const head = headerRow(doc, [
    "time",
    "model",
    "arm / policy",
    ["prompt tok", "prompt tokens"],
    ["lookup", "KV store lookup: outcome · keys · time"],
    ["pool prefix", "prefix tokens the pool (store) holds"],
    "chosen",
    "TTFT",
    "status",
  ], [3, 5, 7]);
  const columns = 9;
  // One tbody per decision: its summary row, then its candidates across the whole width (the
  // score terms need the room; they wrap between terms, never inside one).
  const bodies = decisions.map((d) => {
    const looked = d.lookup
      ? `${d.lookup.outcome} · ${d.lookup.keys} keys · ${d.lookup.elapsedMs} ms`
      : "–";
    // Dispatched by load alone while an instance's KV agreement is blind.
    const lookup = d.kvLoadOnly ? `${looked} · load only (${d.kvLoadOnly})` : looked;
    const candidates = h(doc, "table", { class: "candidates" }, [
      h(doc, "thead", {}, [
        headerRow(doc, [
          ["candidate", "the candidates, best first (bold: chosen)"],
          ["local prefix", "local prefix tokens"],
          ["waiting", "waiting prefill tokens"],
          "score",
          ["terms", "the score's terms (they add up to the score)"],
        ], [1, 2, 3]),
      ]),
      h(
        doc,
        "tbody",
        {},
        d.candidates.map((/** @type {any} */ c) =>
          h(doc, "tr", {
            "data-candidate": c.id,
            class: c.id === d.chosen ? "chosen" : undefined,
          }, [
            h(doc, "td", {}, [
              c.id + (c.excluded ? ` (${c.excluded})` : c.healthy ? "" : " (unhealthy)"),
            ]),
            numberCell(
              doc,
              "local-prefix-tokens",
              c.localPrefixTokens,
              formatInteger(c.localPrefixTokens),
            ),
            numberCell(
              doc,
              "waiting-prefill-tokens",
              c.waitingPrefillTokens,
              formatInteger(c.waitingPrefillTokens),
            ),
            numberCell(doc, "score", c.score, formatTerm(c.score)),
            // One unbreakable span per term: a long list wraps between terms, never inside one.
            h(
              doc,
              "td",
              { class: "terms", "data-field": "terms" },
              Object.entries(c.terms).map(([k, v]) =>
                h(doc, "span", { class: "term" }, [
                  `${k}=${formatTerm(/** @type {number} */ (v))} `,
                ])
              ),
            ),
          ])
        ),
      ),
    ]);
    return h(doc, "tbody", { class: "decision", "data-decision": d.requestId }, [
      h(doc, "tr", { "data-request-id": d.requestId }, [
        h(doc, "td", {}, [formatClock(d.at)]),
        h(doc, "td", {}, [d.model]),
        h(doc, "td", {}, [`${d.arm} / ${d.policy}`]),
        numberCell(doc, "prompt-tokens", d.promptTokens, formatInteger(d.promptTokens)),
        h(doc, "td", { "data-field": "lookup", class: "wrap" }, [lookup]),
        numberCell(
          doc,
          "pool-prefix-tokens",
          d.poolPrefixTokens,
          formatInteger(d.poolPrefixTokens),
        ),
        h(doc, "td", { "data-field": "chosen" }, [d.chosen ?? "–"]),
        numberCell(doc, "ttft", d.ttftS, formatSeconds(d.ttftS)),
        h(doc, "td", { "data-field": "status" }, [`${d.status} ${d.outcome}`]),
      ]),
      h(doc, "tr", { class: "candidates-row", "data-candidates-of": d.requestId }, [
        h(doc, "td", { colspan: columns }, [candidates]),
      ]),
    ]);
  });
  return h(doc, "table", { "data-table": "decisions" }, [
    h(doc, "thead", {}, [head]),
    ...bodies,
  ]);
}

/**
 * Redraws everything from one `/dashboard/data` answer.
 * @param {Document} doc
 * @param {any} data
 */
export function render(doc, data) {
  doc.getElementById("models")?.replaceChildren(
    ...data.models.map((/** @type {any} */ model) => modelCard(doc, model, data.ttft)),
  );
  doc.getElementById("decisions")?.replaceChildren(decisionsTable(doc, data.decisions));
  const updated = doc.getElementById("updated");
  if (updated) updated.textContent = `updated ${formatClock(data.generatedAt)}`;
  doc.body.dataset.generatedAt = String(data.generatedAt);
  doc.body.dataset.refreshes = String(Number(doc.body.dataset.refreshes ?? 0) + 1);
}

// ---------------------------------------------------------------- polling

/** @param {Document} doc @param {string} text @param {"ok" | "error"} kind */
function setStatus(doc, text, kind) {
  const status = doc.getElementById("status");
  if (!status) return;
  status.textContent = text;
  status.className = `status ${kind}`;
}

/**
 * Polls `dashboard/data` (one request at a time, paused while the tab is hidden) and renders.
 * @param {Window} win
 */
export function start(win) {
  const doc = win.document;
  const limit = new URLSearchParams(win.location.search).get("decisions") ?? "20";
  const url = `dashboard/data?decisions=${encodeURIComponent(limit)}`;
  /** @type {number | undefined} */
  let timer;
  const schedule = (/** @type {number} */ ms) => {
    win.clearTimeout(timer);
    timer = win.setTimeout(tick, ms);
  };
  async function tick() {
    if (doc.hidden) return; // resumed by visibilitychange
    const abort = new AbortController();
    const deadline = win.setTimeout(() => abort.abort(), FETCH_TIMEOUT_MS);
    try {
      const response = await win.fetch(url, {
        cache: "no-store",
        credentials: "same-origin",
        signal: abort.signal,
      });
      if (!response.ok) {
        const body = await response.json().catch(() => ({}));
        throw new Error(body?.error?.message ?? `HTTP ${response.status}`);
      }
      render(doc, await response.json());
      setStatus(doc, `live · every ${REFRESH_MS / 1000} s`, "ok");
      schedule(REFRESH_MS);
    } catch (error) {
      setStatus(doc, `not updating: ${/** @type {Error} */ (error).message}`, "error");
      schedule(REFRESH_MS * 5);
    } finally {
      win.clearTimeout(deadline);
    }
  }
  doc.addEventListener("visibilitychange", () => {
    if (!doc.hidden) schedule(0);
  });
  schedule(0);
}

if (typeof window !== "undefined" && typeof document !== "undefined") start(window);

/** Hand-written SVG charts for the simulator's results (no plotting dependency). */

const PALETTE = [
  "#d62728",
  "#1f77b4",
  "#2ca02c",
  "#9467bd",
  "#ff7f0e",
  "#8c564b",
  "#e377c2",
  "#17becf",
];

export interface CdfSeries {
  label: string;
  /** Sorted ascending, seconds. */
  values: readonly number[];
  /** Share of all requests the values stand for (served / total): the curve tops out there. */
  servedShare?: number;
}

/** TTFT CDF per policy on a log time axis, with the SLO as a dashed line. */
export function ttftCdfSvg(
  series: readonly CdfSeries[],
  options: { sloS?: number; title?: string; xLabel?: string; yLabel?: string } = {},
): string {
  const plot = cdfPlot(series, options.sloS);
  const { m, width, height, plotW, plotH } = plot;
  const out: string[] = [svgOpen(width, height, options.title ?? "TTFT CDF per policy")];
  out.push(frame(m.left, m.top, plotW, plotH));
  out.push(...cdfGrid(plot));
  if (options.sloS !== undefined) {
    const sx = r(plot.x(options.sloS));
    out.push(
      `<line x1="${sx}" y1="${m.top}" x2="${sx}" y2="${
        m.top + plotH
      }" stroke="#555" stroke-dasharray="5,4"/>`,
      `<text x="${sx + 4}" y="${m.top + 14}">SLO ${options.sloS} s</text>`,
    );
  }
  series.forEach((s, k) => out.push(...cdfCurve(plot, s, k)));
  out.push(
    `<text x="${m.left + plotW / 2}" y="${height - 10}" text-anchor="middle">${
      escapeXml(options.xLabel ?? "TTFT (s, log scale)")
    }</text>`,
    `<text x="16" y="${m.top + plotH / 2}" text-anchor="middle" transform="rotate(-90 16 ${
      m.top + plotH / 2
    })">${escapeXml(options.yLabel ?? "fraction of requests")}</text>`,
    "</svg>\n",
  );
  return out.join("\n");
}

/** The CDF chart's geometry: margins, the log time axis [lo, hi] and the value-to-pixel maps. */
interface CdfPlot {
  m: { left: number; right: number; top: number; bottom: number };
  width: number;
  height: number;
  plotW: number;
  plotH: number;
  lo: number;
  hi: number;
  x: (seconds: number) => number;
  y: (fraction: number) => number;
}

function cdfPlot(series: readonly CdfSeries[], sloS: number | undefined): CdfPlot {
  const longest = Math.max(0, ...series.map((s) => s.label.length));
  const m = { left: 60, right: Math.max(190, 60 + 7 * longest), top: 40, bottom: 50 };
  const width = 570 + m.right, height = 440;
  const plotW = width - m.left - m.right, plotH = height - m.top - m.bottom;
  const all = series.flatMap((
    s,
  ) => (s.values.length ? [s.values[0], s.values[s.values.length - 1]] : []));
  const lo = Math.max(1e-2, Math.min(...all, 0.1));
  const hi = Math.max(...all, sloS ?? 1, lo * 10);
  const logLo = Math.log10(lo), logHi = Math.log10(hi);
  const x = (v: number) => m.left + (Math.log10(Math.max(v, lo)) - logLo) / (logHi - logLo) * plotW;
  const y = (f: number) => m.top + (1 - f) * plotH;
  return { m, width, height, plotW, plotH, lo, hi, x, y };
}

/** Vertical lines at the time ticks, horizontal ones at the marked fractions, with labels. */
function cdfGrid({ m, plotW, plotH, lo, hi, x, y }: CdfPlot): string[] {
  const out: string[] = [];
  for (const tick of logTicks(lo, hi)) {
    out.push(
      `<line x1="${r(x(tick))}" y1="${m.top}" x2="${r(x(tick))}" y2="${
        m.top + plotH
      }" stroke="#e6e6e6"/>`,
      `<text x="${r(x(tick))}" y="${m.top + plotH + 18}" text-anchor="middle">${tick}</text>`,
    );
  }
  for (const f of [0, 0.25, 0.5, 0.75, 0.9, 1]) {
    out.push(
      `<line x1="${m.left}" y1="${r(y(f))}" x2="${m.left + plotW}" y2="${
        r(y(f))
      }" stroke="#e6e6e6"/>`,
      `<text x="${m.left - 8}" y="${r(y(f)) + 4}" text-anchor="end">${f}</text>`,
    );
  }
  return out;
}

/** Series `k`: its curve (at most 400 points) and its legend entry. */
function cdfCurve({ m, width, x, y }: CdfPlot, s: CdfSeries, k: number): string[] {
  const out: string[] = [];
  const color = PALETTE[k % PALETTE.length];
  const share = s.servedShare ?? 1;
  const points: string[] = [];
  const steps = Math.min(400, s.values.length);
  for (let j = 1; j <= steps; j++) {
    const index = Math.max(0, Math.ceil(j / steps * s.values.length) - 1);
    points.push(`${r(x(s.values[index]))},${r(y((index + 1) / s.values.length * share))}`);
  }
  if (points.length > 0) {
    out.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2" points="${points.join(" ")}"/>`,
    );
  }
  const ly = m.top + 10 + k * 22;
  out.push(
    `<line x1="${width - m.right + 16}" y1="${ly}" x2="${
      width - m.right + 40
    }" y2="${ly}" stroke="${color}" stroke-width="3"/>`,
    `<text x="${width - m.right + 46}" y="${ly + 4}">${escapeXml(s.label)}</text>`,
  );
  return out;
}

export interface LoadPanel {
  label: string;
  periodS: number;
  /** [instance][sample] waiting prefill tokens. */
  waitingTokens: readonly (readonly number[])[];
}

/** One panel per policy: each instance's waiting prefill tokens over time, on the panel's scale. */
export function instanceLoadSvg(
  panels: readonly LoadPanel[],
  options: { title?: string } = {},
): string {
  const { panelW, panelH, gap, top } = INSTANCE_LOAD_LAYOUT;
  const columns = Math.min(2, Math.max(1, panels.length));
  const rows = Math.ceil(panels.length / columns);
  const width = columns * panelW + (columns + 1) * gap;
  const height = top + rows * (panelH + gap);
  const out: string[] = [
    svgOpen(
      width,
      height,
      options.title ??
        "Waiting prefill tokens per instance over time (each panel on its own scale)",
    ),
  ];
  panels.forEach((panel, p) => out.push(...instanceLoadPanel(panel, p, columns)));
  out.push("</svg>\n");
  return out.join("\n");
}

const INSTANCE_LOAD_LAYOUT = {
  panelW: 380,
  panelH: 220,
  gap: 20,
  top: 40,
  m: { left: 56, right: 10, top: 24, bottom: 34 },
};

/** Panel `p` of the grid: the axes and one line per instance, hues spread over the instances. */
function instanceLoadPanel(panel: LoadPanel, p: number, columns: number): string[] {
  const { panelW, panelH, gap, top, m } = INSTANCE_LOAD_LAYOUT;
  const ox = gap + (p % columns) * (panelW + gap),
    oy = top + Math.floor(p / columns) * (panelH + gap);
  const plotW = panelW - m.left - m.right, plotH = panelH - m.top - m.bottom;
  const samples = Math.max(1, ...panel.waitingTokens.map((s) => s.length));
  const duration = samples * panel.periodS;
  const x = (j: number) => ox + m.left + j / Math.max(1, samples - 1) * plotW;
  // Each panel has its own (labelled) scale: a shared one flattens the balanced policies.
  const yMax = niceCeil(Math.max(1, ...panel.waitingTokens.flatMap((s) => s as number[])));
  const y = (tokens: number) => oy + m.top + (1 - tokens / yMax) * plotH;
  const out = [
    `<text x="${ox + m.left}" y="${oy + 16}" font-weight="bold">${escapeXml(panel.label)}</text>`,
    frame(ox + m.left, oy + m.top, plotW, plotH),
  ];
  for (const f of [0, 0.5, 1]) {
    const ty = r(oy + m.top + (1 - f) * plotH);
    out.push(
      `<text x="${ox + m.left - 6}" y="${ty + 4}" text-anchor="end">${tokenLabel(f * yMax)}</text>`,
    );
  }
  for (const f of [0, 0.5, 1]) {
    out.push(
      `<text x="${r(ox + m.left + f * plotW)}" y="${
        oy + m.top + plotH + 16
      }" text-anchor="middle">${Math.round(f * duration)} s</text>`,
    );
  }
  panel.waitingTokens.forEach((series, k) => {
    const hue = Math.round(k * 360 / panel.waitingTokens.length);
    const points = series.map((tokens, j) => `${r(x(j))},${r(y(tokens))}`).join(" ");
    out.push(
      `<polyline fill="none" stroke="hsl(${hue},65%,45%)" stroke-opacity="0.7" stroke-width="1" points="${points}"/>`,
    );
  });
  return out;
}

export interface PoolLoadPanel {
  label: string;
  periodS: number;
  /** Prefill pool load per sample (1 = the queue takes the TTFT SLO). */
  prefill: readonly number[];
  /** Decode pool load per sample (1 = the batch's step takes the TBT SLO). */
  decode: readonly number[];
  /** Requests refused per sample. */
  rejected: readonly number[];
}

/**
 * The prefill and decode pools' load over time, one panel per run on a shared scale, with the
 * SLO line at 1 and the refusals per sample as grey bars (their own scale): the Mooncake paper's
 * Fig. 9-10 view of early rejection's load oscillation.
 */
export function poolLoadSvg(
  allPanels: readonly PoolLoadPanel[],
  options: { title?: string; fromS?: number; toS?: number } = {},
): string {
  const startS = options.fromS ?? 0;
  const panels = windowPanels(allPanels, startS, options.toS);
  const { panelW, panelH, gap, top } = POOL_LOAD_LAYOUT;
  const width = panelW + 2 * gap;
  const height = top + panels.length * (panelH + gap);
  const yMax = Math.max(
    1.5,
    niceCeil(Math.max(0, ...panels.flatMap((p) => [...p.prefill, ...p.decode]))),
  );
  const out: string[] = [
    svgOpen(
      width,
      height,
      options.title ?? "Prefill and decode pool load over time (1 = at the SLO)",
    ),
    ...poolLoadLegend(),
  ];
  panels.forEach((panel, p) => out.push(...poolLoadPanel(panel, p, yMax, startS)));
  out.push("</svg>\n");
  return out.join("\n");
}

const POOL_LOAD_LAYOUT = {
  panelW: 820,
  panelH: 200,
  gap: 18,
  top: 64,
  m: { left: 56, right: 16, top: 22, bottom: 30 },
  colors: { prefill: "#d62728", decode: "#1f77b4" },
};

/** A time window: the samples in [startS, toS], the axis labelled from startS. */
function windowPanels(
  allPanels: readonly PoolLoadPanel[],
  startS: number,
  toS: number | undefined,
): PoolLoadPanel[] {
  return allPanels.map((panel) => {
    const first = Math.max(0, Math.floor(startS / panel.periodS));
    const last = toS === undefined ? undefined : Math.ceil(toS / panel.periodS) + 1;
    return {
      ...panel,
      prefill: panel.prefill.slice(first, last),
      decode: panel.decode.slice(first, last),
      rejected: panel.rejected.slice(first, last),
    };
  });
}

function poolLoadLegend(): string[] {
  const { gap, m, colors } = POOL_LOAD_LAYOUT;
  return [
    `<line x1="${gap + m.left}" y1="44" x2="${
      gap + m.left + 24
    }" y2="44" stroke="${colors.prefill}" stroke-width="3"/>`,
    `<text x="${gap + m.left + 30}" y="48">prefill: queued prefill time / TTFT SLO</text>`,
    `<line x1="${gap + m.left + 300}" y1="44" x2="${
      gap + m.left + 324
    }" y2="44" stroke="${colors.decode}" stroke-width="3"/>`,
    `<text x="${
      gap + m.left + 330
    }" y="48">decode: batch step above its fixed cost / the TBT SLO's</text>`,
    `<rect x="${gap + m.left + 680}" y="38" width="10" height="10" fill="#bbb"/>`,
    `<text x="${gap + m.left + 696}" y="48">refusals</text>`,
  ];
}

/** One run's panel: refusal bars, the axes, the SLO line and both pools' load. */
function poolLoadPanel(panel: PoolLoadPanel, p: number, yMax: number, startS: number): string[] {
  const { panelW, panelH, gap, top, m, colors } = POOL_LOAD_LAYOUT;
  const ox = gap, oy = top + p * (panelH + gap);
  const plotW = panelW - m.left - m.right, plotH = panelH - m.top - m.bottom;
  const samples = Math.max(1, panel.prefill.length, panel.decode.length);
  const duration = samples * panel.periodS;
  const x = (j: number) => ox + m.left + j / Math.max(1, samples - 1) * plotW;
  const y = (v: number) => oy + m.top + (1 - Math.min(v, yMax) / yMax) * plotH;
  const out = [
    `<text x="${ox + m.left}" y="${oy + 14}" font-weight="bold">${escapeXml(panel.label)}</text>`,
    frame(ox + m.left, oy + m.top, plotW, plotH),
  ];
  const maxRejected = Math.max(1, ...panel.rejected);
  const barW = Math.max(0.5, plotW / samples);
  panel.rejected.forEach((count, j) => {
    if (count <= 0) return;
    const h = count / maxRejected * plotH * 0.5;
    out.push(
      `<rect x="${r(x(j) - barW / 2)}" y="${r(oy + m.top + plotH - h)}" width="${
        r(barW)
      }" height="${r(h)}" fill="#bbb" fill-opacity="0.6"/>`,
    );
  });
  for (const v of [0, 1, yMax]) {
    out.push(`<text x="${ox + m.left - 6}" y="${r(y(v)) + 4}" text-anchor="end">${v}</text>`);
  }
  out.push(
    `<line x1="${ox + m.left}" y1="${r(y(1))}" x2="${ox + m.left + plotW}" y2="${
      r(y(1))
    }" stroke="#555" stroke-dasharray="5,4"/>`,
  );
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    out.push(
      `<text x="${r(ox + m.left + f * plotW)}" y="${
        oy + m.top + plotH + 16
      }" text-anchor="middle">${Math.round(startS + f * duration)} s</text>`,
    );
  }
  for (const key of ["prefill", "decode"] as const) {
    const points = panel[key].map((v, j) => `${r(x(j))},${r(y(v))}`).join(" ");
    out.push(
      `<polyline fill="none" stroke="${colors[key]}" stroke-width="1.5" points="${points}"/>`,
    );
  }
  return out;
}

function tokenLabel(value: number): string {
  if (value >= 1e6) return `${r(value / 1e6)}M`;
  if (value >= 1e3) return `${r(value / 1e3)}k`;
  return `${Math.round(value)}`;
}

function svgOpen(width: number, height: number, title: string): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">\n` +
    `<rect width="100%" height="100%" fill="white"/>\n` +
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${
      escapeXml(title)
    }</text>`;
}

function frame(x: number, y: number, w: number, h: number): string {
  return `<rect x="${x}" y="${y}" width="${w}" height="${h}" fill="none" stroke="#999"/>`;
}

function logTicks(lo: number, hi: number): number[] {
  const ticks: number[] = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const d of [1, 3]) {
      const v = Number((d * 10 ** e).toPrecision(1));
      if (v >= lo && v <= hi) ticks.push(v);
    }
  }
  return ticks;
}

function niceCeil(value: number): number {
  const base = 10 ** Math.floor(Math.log10(Math.max(value, 1e-9)));
  for (const step of [1, 2, 2.5, 5, 10]) if (value <= step * base) return step * base;
  return 10 * base;
}

function r(value: number): number {
  return Math.round(value * 10) / 10;
}

function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

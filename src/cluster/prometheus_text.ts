/**
 * Parser for the Prometheus text exposition format (0.0.4), tolerant of OpenMetrics 1.0 text:
 * HELP/TYPE/UNIT comments, label values with `\\`, `\"` and `\n` escapes, `NaN`/`+Inf`/`-Inf`,
 * optional timestamps, exemplars (`# {...} v`, ignored), `# EOF`, metric names with colons and
 * the quoted UTF-8 names of Prometheus 3 (`{"my.metric",a="b"} 1`).
 *
 * Pure. A malformed line is reported in `errors` and skipped (a load reader should still use the
 * lines it understood); `strict: true` throws on the first one instead.
 * (npm `parse-prometheus-text-format@1.1.1` was evaluated and rejected: it reads an exemplar as the
 * timestamp and returns values as strings.)
 */

export type PromMetricType =
  | "counter"
  | "gauge"
  | "histogram"
  | "summary"
  | "untyped"
  | "unknown"
  | "gaugehistogram"
  | "info"
  | "stateset";

export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
  /** Milliseconds since the epoch (OpenMetrics seconds are converted). */
  timestampMs?: number;
}

export interface PromFamilyInfo {
  name: string;
  type?: PromMetricType;
  help?: string;
  unit?: string;
}

export interface PromParseError {
  /** 1-based line number. */
  line: number;
  message: string;
  text: string;
}

export interface PromParseResult {
  samples: PromSample[];
  /** HELP/TYPE/UNIT metadata by family name, as declared. */
  families: Map<string, PromFamilyInfo>;
  errors: PromParseError[];
  /** A `# EOF` line was found: OpenMetrics text, timestamps were read as seconds. */
  openMetrics: boolean;
}

export interface PromParseOptions {
  /** Only samples whose metric name passes are parsed further (cheap filtering of large pages). */
  keep?: (metricName: string) => boolean;
  /** Throw on the first malformed line instead of collecting it in `errors`. */
  strict?: boolean;
}

const TYPES = new Set<string>([
  "counter",
  "gauge",
  "histogram",
  "summary",
  "untyped",
  "unknown",
  "gaugehistogram",
  "info",
  "stateset",
]);

class LineError extends Error {}

function isBlank(c: string): boolean {
  return c === " " || c === "\t";
}

function isNameStart(c: string, colons: boolean): boolean {
  return (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || c === "_" || (colons && c === ":");
}

function isNameChar(c: string, colons: boolean): boolean {
  return isNameStart(c, colons) || (c >= "0" && c <= "9");
}

/** Reads a float as Prometheus does: `NaN`, `+Inf`, `-Inf`, `Inf` in any case, decimal or exponent. */
export function parsePromFloat(token: string): number {
  const lower = token.toLowerCase();
  if (lower === "nan") return NaN;
  if (lower === "+inf" || lower === "inf" || lower === "+infinity" || lower === "infinity") {
    return Infinity;
  }
  if (lower === "-inf" || lower === "-infinity") return -Infinity;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(token)) {
    throw new LineError(`not a number: "${token}"`);
  }
  return Number(token);
}

class Cursor {
  i = 0;
  constructor(readonly s: string) {}

  get done(): boolean {
    return this.i >= this.s.length;
  }
  /** The character at the cursor ("" at the end); a method so that checks do not narrow it. */
  peek(): string {
    return this.s[this.i] ?? "";
  }
  skipBlanks(): number {
    const start = this.i;
    while (!this.done && isBlank(this.peek())) this.i++;
    return this.i - start;
  }
  name(colons: boolean): string {
    const start = this.i;
    if (this.done || !isNameStart(this.peek(), colons)) return "";
    while (!this.done && isNameChar(this.peek(), colons)) this.i++;
    return this.s.slice(start, this.i);
  }
  /** A double-quoted string with `\\`, `\"`, `\n` escapes (others kept as written). */
  quoted(): string {
    if (this.peek() !== '"') throw new LineError(`expected '"' at column ${this.i + 1}`);
    this.i++;
    let out = "";
    let chunkStart = this.i;
    while (!this.done) {
      const c = this.peek();
      if (c === '"') {
        out += this.s.slice(chunkStart, this.i);
        this.i++;
        return out;
      }
      if (c === "\\") {
        out += this.s.slice(chunkStart, this.i);
        const next = this.s[this.i + 1];
        if (next === undefined) break;
        out += next === "n" ? "\n" : next === "\\" || next === '"' ? next : "\\" + next;
        this.i += 2;
        chunkStart = this.i;
        continue;
      }
      this.i++;
    }
    throw new LineError("unterminated quoted string");
  }
  token(): string {
    const start = this.i;
    while (!this.done && !isBlank(this.peek())) this.i++;
    return this.s.slice(start, this.i);
  }
}

function setLabel(labels: Record<string, string>, name: string, value: string): void {
  if (Object.hasOwn(labels, name)) throw new LineError(`duplicate label "${name}"`);
  // defineProperty keeps a label called "__proto__" an ordinary key.
  Object.defineProperty(labels, name, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

/** Parses `{a="1",b="2"}` at the cursor; returns the quoted metric name if the set holds one. */
function readLabels(cur: Cursor, labels: Record<string, string>): string | undefined {
  let metricName: string | undefined;
  cur.i++; // "{"
  for (;;) {
    cur.skipBlanks();
    if (cur.done) throw new LineError("unterminated label set");
    if (cur.peek() === "}") {
      cur.i++;
      return metricName;
    }
    let labelName: string;
    if (cur.peek() === '"') {
      labelName = cur.quoted();
      cur.skipBlanks();
      if (cur.peek() === "," || cur.peek() === "}") {
        // A bare quoted string is the metric name (Prometheus 3 UTF-8 names).
        if (metricName !== undefined) throw new LineError("two metric names in one label set");
        metricName = labelName;
        if (cur.peek() === ",") cur.i++;
        continue;
      }
    } else {
      labelName = cur.name(false);
      if (!labelName) throw new LineError(`bad label name at column ${cur.i + 1}`);
      cur.skipBlanks();
    }
    if (cur.peek() !== "=") throw new LineError(`expected '=' after label "${labelName}"`);
    cur.i++;
    cur.skipBlanks();
    setLabel(labels, labelName, cur.quoted());
    cur.skipBlanks();
    if (cur.peek() === ",") cur.i++;
    else if (cur.peek() !== "}") throw new LineError(`expected ',' or '}' at column ${cur.i + 1}`);
  }
}

function parseComment(line: string, families: Map<string, PromFamilyInfo>): "eof" | void {
  const cur = new Cursor(line);
  cur.i = 1;
  cur.skipBlanks();
  const keyword = cur.token();
  if (keyword === "EOF") {
    cur.skipBlanks();
    return cur.done ? "eof" : undefined;
  }
  if (keyword !== "HELP" && keyword !== "TYPE" && keyword !== "UNIT") return; // plain comment
  if (cur.skipBlanks() === 0) return;
  const name = cur.peek() === '"' ? cur.quoted() : cur.name(true);
  if (!name) throw new LineError(`# ${keyword} without a metric name`);
  cur.skipBlanks();
  const rest = line.slice(cur.i);
  const family = families.get(name) ?? { name };
  families.set(name, family);
  if (keyword === "HELP") {
    family.help = rest.replace(
      /\\(.)/g,
      (_m, c: string) => (c === "n" ? "\n" : c === "\\" ? "\\" : "\\" + c),
    );
  } else if (keyword === "TYPE") {
    const type = rest.trim().toLowerCase();
    if (!TYPES.has(type)) throw new LineError(`unknown metric type "${rest.trim()}"`);
    family.type = type as PromMetricType;
  } else {
    family.unit = rest.trim();
  }
}

function parseSample(
  line: string,
  openMetrics: boolean,
  keep: ((name: string) => boolean) | undefined,
): PromSample | undefined {
  const cur = new Cursor(line);
  cur.skipBlanks();
  let name = cur.peek() === "{" ? "" : cur.name(true);
  if (!name && cur.peek() !== "{") throw new LineError(`bad metric name at column ${cur.i + 1}`);
  if (name && keep && !keep(name)) return undefined;
  const labels: Record<string, string> = {};
  let blanks = cur.skipBlanks();
  if (cur.peek() === "{") {
    const quotedName = readLabels(cur, labels);
    if (quotedName !== undefined) {
      if (name) throw new LineError("metric name given twice");
      name = quotedName;
      if (keep && !keep(name)) return undefined;
    }
    if (!name) throw new LineError("sample without a metric name");
    blanks = cur.skipBlanks();
  }
  if (blanks === 0 && !cur.done) {
    throw new LineError(`expected a blank before the value at column ${cur.i + 1}`);
  }
  if (cur.done) throw new LineError("sample without a value");
  const value = parsePromFloat(cur.token());
  const sample: PromSample = { name, labels, value };
  cur.skipBlanks();
  if (cur.done || cur.peek() === "#") return sample; // "#": an OpenMetrics exemplar, ignored
  const ts = parsePromFloat(cur.token());
  if (!Number.isFinite(ts)) throw new LineError("timestamp is not a finite number");
  sample.timestampMs = openMetrics ? ts * 1000 : ts;
  cur.skipBlanks();
  if (!cur.done && cur.peek() !== "#") {
    throw new LineError(`unexpected text after the timestamp at column ${cur.i + 1}`);
  }
  return sample;
}

/** Parses a Prometheus (or OpenMetrics) text page into samples. */
export function parsePrometheusText(text: string, options: PromParseOptions = {}): PromParseResult {
  const result: PromParseResult = {
    samples: [],
    families: new Map(),
    errors: [],
    openMetrics: /^[ \t]*# EOF[ \t]*\r?$/m.test(text),
  };
  const lines = text.split("\n");
  for (let n = 0; n < lines.length; n++) {
    let line = lines[n];
    if (line.endsWith("\r")) line = line.slice(0, -1);
    let start = 0;
    while (start < line.length && isBlank(line[start])) start++;
    if (start === line.length) continue;
    try {
      if (line[start] === "#") {
        if (parseComment(line.slice(start), result.families) === "eof") break;
        continue;
      }
      const sample = parseSample(line, result.openMetrics, options.keep);
      if (sample) result.samples.push(sample);
    } catch (error) {
      if (!(error instanceof LineError)) throw error;
      if (options.strict) {
        throw new Error(`Prometheus text line ${n + 1}: ${error.message}: ${line.slice(0, 200)}`);
      }
      result.errors.push({ line: n + 1, message: error.message, text: line.slice(0, 200) });
    }
  }
  return result;
}

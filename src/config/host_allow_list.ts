/**
 * Which hosts instance URLs may point at (`admin.allowedInstanceHosts`): host names (exact,
 * case-insensitive, a trailing dot ignored), IP addresses and CIDR blocks, IPv4 or IPv6.
 * An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) is judged as its IPv4 address.
 */

type Pattern =
  | { kind: "name"; name: string }
  | { kind: "network"; family: 4 | 6; base: bigint; prefix: number };

export class HostAllowList {
  readonly entries: readonly string[];
  readonly #patterns: Pattern[];

  constructor(entries: readonly string[]) {
    this.entries = entries;
    this.#patterns = entries.map((entry) => {
      const pattern = parseHostPattern(entry);
      if (!pattern) throw new Error(`not a host name, IP address or CIDR block: "${entry}"`);
      return pattern;
    });
  }

  /** `host` as a URL's `hostname` gives it (IPv6 in brackets or not). */
  allows(host: string): boolean {
    if (this.#patterns.length === 0) return false; // e.g. no trusted proxies: every request
    const name = normalizeHost(host);
    const address = parseIp(name);
    return this.#patterns.some((pattern) => {
      if (pattern.kind === "name") return pattern.name === name;
      return address !== undefined && address.family === pattern.family &&
        sameNetwork(address.value, pattern.base, pattern.prefix, pattern.family);
    });
  }
}

/** A host name, IP address or CIDR block; undefined when it is none of them. */
export function parseHostPattern(entry: string): Pattern | undefined {
  const [host, prefixText, ...rest] = entry.trim().split("/");
  if (rest.length > 0) return undefined;
  const address = parseIp(normalizeHost(host));
  if (address) {
    const bits = address.family === 4 ? 32 : 128;
    const prefix = prefixText === undefined ? bits : Number(prefixText);
    if (!/^\d+$/.test(prefixText ?? String(bits)) || prefix > bits) return undefined;
    return { kind: "network", family: address.family, base: address.value, prefix };
  }
  if (prefixText !== undefined) return undefined;
  const name = normalizeHost(host);
  return isHostName(name) ? { kind: "name", name } : undefined;
}

/** Lower case, no brackets, no trailing dot. */
export function normalizeHost(host: string): string {
  return host.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "");
}

function isHostName(name: string): boolean {
  return name.length > 0 && name.length <= 253 &&
    name.split(".").every((label) => /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/.test(label));
}

function sameNetwork(address: bigint, base: bigint, prefix: number, family: 4 | 6): boolean {
  const shift = BigInt((family === 4 ? 32 : 128) - prefix);
  return (address >> shift) === (base >> shift);
}

/** An IPv4 or IPv6 address as a number; IPv4-mapped IPv6 addresses become IPv4. */
function parseIp(text: string): { family: 4 | 6; value: bigint } | undefined {
  const v4 = parseIpv4(text);
  if (v4 !== undefined) return { family: 4, value: v4 };
  const v6 = parseIpv6(text);
  if (v6 === undefined) return undefined;
  if (v6 >> 32n === 0xffffn) return { family: 4, value: v6 & 0xffffffffn };
  return { family: 6, value: v6 };
}

function parseIpv4(text: string): bigint | undefined {
  const parts = text.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) {
    return undefined;
  }
  return parts.reduce((value, part) => (value << 8n) | BigInt(part), 0n);
}

function parseIpv6(text: string): bigint | undefined {
  if (!text.includes(":") || text.includes("%")) return undefined;
  let groups = text.split(":");
  const tail = groups[groups.length - 1];
  if (tail.includes(".")) {
    const v4 = parseIpv4(tail);
    if (v4 === undefined) return undefined;
    groups = [...groups.slice(0, -1), (v4 >> 16n).toString(16), (v4 & 0xffffn).toString(16)];
  }
  const gap = groups.indexOf("");
  if (text.includes("::")) {
    const head = text.startsWith("::") ? [] : groups.slice(0, gap);
    const rest = groups.slice(groups.lastIndexOf("") + 1);
    if (text.split("::").length > 2 || head.length + rest.length > 7) return undefined;
    groups = [...head, ...Array(8 - head.length - rest.length).fill("0"), ...rest];
  }
  if (groups.length !== 8 || !groups.every((g) => /^[0-9a-f]{1,4}$/.test(g))) return undefined;
  return groups.reduce((value, group) => (value << 16n) | BigInt(parseInt(group, 16)), 0n);
}

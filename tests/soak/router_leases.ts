/** Leases a router holds, read from its /metrics (in-flight prefill + decode requests). */
const LEASE_GAUGES = [
  "tidegate_instance_inflight_prefill_requests",
  "tidegate_instance_inflight_decode_requests",
];

export async function routerLeases(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return sumGauges(text, LEASE_GAUGES);
}

/** The sum of every sample of the named gauges in a Prometheus text page. */
export function sumGauges(text: string, names: readonly string[]): number {
  let total = 0;
  for (const line of text.split("\n")) {
    const name = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line)?.[1];
    if (name && names.includes(name)) total += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return total;
}

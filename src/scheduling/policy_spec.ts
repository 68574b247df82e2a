/**
 * A policy named on a command line with numeric parameters: `name`, or `name:key=value&key=value`
 * (e.g. `affinity_ttft:duplicationWeight=1`). Only the syntax is checked here: createPolicy
 * (registry.ts) refuses an unknown name or a parameter the policy does not take.
 */
export interface PolicySpec {
  name: string;
  params: Record<string, number>;
}

/** Parses `name[:key=value&...]`; throws naming the pair that is not `key=number`. */
export function parsePolicySpec(spec: string): PolicySpec {
  const at = spec.indexOf(":");
  if (at < 0) return { name: spec, params: {} };
  const params: Record<string, number> = {};
  for (const pair of spec.slice(at + 1).split("&")) {
    const [key, value, ...rest] = pair.split("=");
    if (
      !key || value === undefined || value === "" || rest.length > 0 ||
      !Number.isFinite(Number(value))
    ) {
      throw new Error(`policy ${spec}: "${pair}" is not key=number`);
    }
    params[key] = Number(value);
  }
  return { name: spec.slice(0, at), params };
}

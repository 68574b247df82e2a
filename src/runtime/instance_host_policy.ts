/**
 * `admin.allowedInstanceHosts`: which hosts instance URLs may point at.
 *
 * Set: exactly those host names, addresses and CIDR blocks, for the admin API and discovery.
 * Unset (the default): the hosts of the configured instances, the discovery entries' host names
 * and the addresses discovery currently resolves them to; discovery itself is then unrestricted
 * (what DNS answers for a configured name is what the operator configured).
 */
import { HostAllowList, parseHostPattern } from "../config/host_allow_list.ts";
import { urlHost } from "../config/instance_url.ts";
import type { Config } from "../config/schema.ts";

/** The hosts an admin-registered instance may use; `discovered`: current discovered hosts. */
export function adminInstanceHosts(config: Config, discovered: Iterable<string>): HostAllowList {
  const explicit = config.admin.allowedInstanceHosts;
  if (explicit) return new HostAllowList(explicit);
  const hosts = new Set([...configuredHosts(config), ...discovered]);
  return new HostAllowList([...hosts].filter((host) => parseHostPattern(host) !== undefined));
}

/** What discovery may admit: the explicit list, or anything when it is unset. */
export function discoveryHostFilter(config: Config): ((host: string) => boolean) | undefined {
  // Asked for every discovered instance on every refresh: parsed once per config.
  if (discoveryFilters.has(config)) return discoveryFilters.get(config);
  const explicit = config.admin.allowedInstanceHosts;
  const list = explicit && new HostAllowList(explicit);
  const filter = list ? (host: string) => list.allows(host) : undefined;
  discoveryFilters.set(config, filter);
  return filter;
}

const discoveryFilters = new WeakMap<Config, ((host: string) => boolean) | undefined>();

/** Configured instances' hosts and discovery host names, every model. */
function configuredHosts(config: Config): string[] {
  return config.models.flatMap((model) => [
    ...model.instances.flatMap((instance) => urlHost(instance.url) ?? []),
    ...model.discovery.map((entry) => entry.hostname),
  ]);
}

/**
 * Reading a Mooncake master's `GET /health` (docs/compat.md §4) and choosing, from the answers
 * of every configured master, the one that serves. Pure.
 *
 * The admin server writes `{"status":"ok","role":R,"ha_state":S,"service_ready":B}` plus
 * `leader_address` and `view_version` when it has seen a leader (some builds write them `null`
 * otherwise). `role` is `leader` while the state is `leader_warmup` or `serving` and `standby`
 * in `starting`, `standby`, `candidate`, `recovering` and `catching_up` (Mooncake's docs also
 * say `primary`). Only `service_ready` says the data routes answer; `status` is `ok` on a
 * standby too. Versions before HA answer a plain `OK`: a master without HA always serves.
 */

export interface MasterHealth {
  /** The data routes (`/batch_query_keys`) answer here. */
  serving: boolean;
  role?: string;
  haState?: string;
  leaderAddress?: string;
}

/** The master's health from its `/health` answer; undefined when it is not a master's. */
export function parseMasterHealth(status: number, body: string): MasterHealth | undefined {
  if (status !== 200) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return body.trim() === "OK" ? { serving: true } : undefined;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined;
  const record = parsed as Record<string, unknown>;
  const role = stringField(record.role);
  const haState = stringField(record.ha_state);
  const ready = record.service_ready;
  const serving = typeof ready === "boolean"
    ? ready
    : (role === "leader" || role === "primary") && (haState ?? "serving") === "serving";
  const health: MasterHealth = { serving };
  if (role !== undefined) health.role = role;
  if (haState !== undefined) health.haState = haState;
  const leader = stringField(record.leader_address);
  if (leader !== undefined) health.leaderAddress = leader;
  return health;
}

/**
 * The master to follow: `current` while it serves, else the first serving one in configured
 * order, else undefined (none serves: keep whatever is followed).
 */
export function servingMaster(
  urls: readonly string[],
  reports: ReadonlyMap<string, MasterHealth | undefined>,
  current: string,
): string | undefined {
  if (reports.get(current)?.serving === true) return current;
  return urls.find((url) => reports.get(url)?.serving === true);
}

function stringField(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

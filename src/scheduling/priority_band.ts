/**
 * A request's band in the flow-control queue: the priority it asks for (lower goes first, as vLLM
 * orders its queue), never more urgent than its tenant may ask, within a small range so that a
 * band is also a bounded metric label. Pure.
 */
export const MIN_PRIORITY = -10;
export const MAX_PRIORITY = 10;

/** A tenant's bounds (src/config/schema.ts `tenants`); absent: band 0, any ask allowed. */
export interface TenantBand {
  priority?: number;
  minPriority?: number;
}

/**
 * `asked` is the request's own priority (undefined: none); `tenant` undefined when the router has
 * no tenants, and then any ask within the range is taken as it is.
 */
export function priorityBand(asked: number | undefined, tenant?: TenantBand): number {
  const own = tenant?.priority ?? 0;
  const floor = tenant ? tenant.minPriority ?? own : MIN_PRIORITY;
  const wanted = asked === undefined || !Number.isFinite(asked) ? own : Math.round(asked);
  return Math.min(MAX_PRIORITY, Math.max(floor, MIN_PRIORITY, wanted));
}

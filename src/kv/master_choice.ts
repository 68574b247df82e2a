/**
 * Which Mooncake master a lookup asks (docs/compat.md §4, "HA"): pure, no I/O, no clock.
 *
 * In HA mode one master (the leader) serves and the standbys answer every data route with 503
 * (`error_code` -1011, "service plane is not active"). A 503 or a 404 (not the admin port) will
 * not change within a lookup's deadline, so the same master is never asked again for that
 * batch: the next configured master is. An unreachable master is passed over too, but may be
 * retried once nothing better is left. A 5xx or garbage is retried on the same master.
 */

/** What one attempt on one master says about that master. */
export type MasterVerdict =
  /** 200 with a readable answer. */
  | "served"
  /** 503 (HA standby, master still starting) or 404 (not the admin port): ask another. */
  | "not_serving"
  /** No HTTP answer (refused, reset, DNS): ask another, or this one again if none is left. */
  | "unreachable"
  /** Any other failure (500, a 200 that is not the expected JSON): retry the same master. */
  | "failing"
  /** 400: our request is wrong; no master can answer it. */
  | "bad_request";

/**
 * The verdict of one attempt: `status` undefined when no HTTP answer came, `readable` whether a
 * 200's body parsed.
 */
export function verdictOf(status: number | undefined, readable: boolean): MasterVerdict {
  if (status === undefined) return "unreachable";
  if (status === 200 && readable) return "served";
  if (status === 503 || status === 404) return "not_serving";
  if (status === 400) return "bad_request";
  return "failing";
}

/** A batch's attempts so far: masters that said they do not serve, masters already asked. */
export interface BatchTrail {
  notServing: Set<string>;
  asked: Set<string>;
}

export function newTrail(): BatchTrail {
  return { notServing: new Set(), asked: new Set() };
}

/**
 * Where the batch's next attempt goes after `verdict` from `url` (already in the trail), or
 * undefined to stop. Masters are taken in configured order, starting after `url`: first one not
 * asked yet, then (only after unreachable answers) one that did not say it does not serve.
 */
export function nextMaster(
  urls: readonly string[],
  url: string,
  verdict: MasterVerdict,
  trail: BatchTrail,
): string | undefined {
  if (verdict === "served" || verdict === "bad_request") return undefined;
  if (verdict === "failing") return url;
  const ring = ringAfter(urls, url);
  return ring.find((u) => !trail.asked.has(u)) ?? ring.find((u) => !trail.notServing.has(u));
}

/** Records one attempt's verdict in the trail. */
export function recordAttempt(trail: BatchTrail, url: string, verdict: MasterVerdict): void {
  trail.asked.add(url);
  if (verdict === "not_serving") trail.notServing.add(url);
}

/** Attempts one batch may make: its retries on one master plus one try on each other master. */
export function attemptBudget(maxAttempts: number, masters: number): number {
  return Math.max(1, maxAttempts) + Math.max(0, masters - 1);
}

/** The configured masters in order, starting with the one after `url` and ending with `url`. */
function ringAfter(urls: readonly string[], url: string): string[] {
  const at = urls.indexOf(url);
  if (at === -1) return [...urls];
  return [...urls.slice(at + 1), ...urls.slice(0, at + 1)];
}

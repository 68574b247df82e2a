/** Number formats the simulator's Markdown reports share; a figure that is not finite is "n/a". */

export function fixed(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : "n/a";
}

/** A share (0..1) as a percentage with one decimal. */
export function percent(share: number): string {
  return Number.isFinite(share) ? `${(share * 100).toFixed(1)}%` : "n/a";
}

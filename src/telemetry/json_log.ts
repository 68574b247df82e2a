/** The default log sink: one JSON line per event on stderr. */
export function jsonLog(message: string, fields: Record<string, unknown> = {}): void {
  console.error(JSON.stringify({ time: new Date().toISOString(), msg: message, ...fields }));
}

/** Hop-by-hop headers (RFC 9110 §7.6.1) belong to one connection and are never forwarded. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/**
 * A copy of `headers` without hop-by-hop headers, those the `Connection` header names, and the
 * ones the HTTP client recomputes (`host`, `content-length`).
 */
export function endToEndHeaders(headers: Headers): Headers {
  const named = new Set(
    (headers.get("connection") ?? "").split(",").map((h) => h.trim().toLowerCase()).filter(Boolean),
  );
  const out = new Headers();
  headers.forEach((value, key) => {
    if (HOP_BY_HOP.has(key) || named.has(key) || key === "host" || key === "content-length") return;
    out.set(key, value);
  });
  return out;
}

/**
 * What goes to an engine: the client's end-to-end headers, less `x-tidegate-*` (the router's own
 * namespace: a client must not pass itself off as the router to the engine).
 */
export function upstreamHeaders(client: Headers): Headers {
  const out = endToEndHeaders(client);
  for (const name of [...out.keys()]) if (name.startsWith("x-tidegate-")) out.delete(name);
  return out;
}

/** What goes back to the client: the engine's end-to-end headers, less its `server` banner. */
export function downstreamHeaders(engine: Headers): Headers {
  const out = endToEndHeaders(engine);
  out.delete("server");
  return out;
}

/**
 * Access control for every `/admin` route: a bearer token from config (`admin.token`, which may
 * be `env:NAME`), compared in constant time; with no token configured, only clients on loopback
 * are answered (127.0.0.0/8, ::1, IPv4-mapped loopback, Unix sockets). A browser on the same
 * machine is a loopback client too, so without a token a request must also name a loopback
 * `Host` (no DNS rebinding) and carry no foreign `Origin` (no cross-site form posts).
 *
 * The client address comes from Hono's `c.env.remoteAddr`, which the router passes from
 * the listener's connection info (routes/listener.ts). A request without one was made in-process (`app.request`,
 * `router.fetch`) and counts as loopback.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { openAIError } from "../openai/errors.ts";

/** What the router hands Hono as `env` for each request. */
export interface ConnectionEnv {
  remoteAddr?: Deno.Addr;
}

export interface AdminAuthOptions {
  /** The configured token, read per request so that a reload takes effect at once. */
  token: () => string | undefined;
}

/** Hono middleware guarding admin routes; answers 401/403 in OpenAI's error shape. */
export function adminAuth(
  options: AdminAuthOptions,
): MiddlewareHandler<{ Bindings: ConnectionEnv }> {
  return async (c, next) => {
    const token = options.token();
    if (token === undefined) {
      if (!isLoopback(c.env?.remoteAddr)) {
        return openAIError(
          403,
          "The admin API answers only loopback clients when no admin.token is configured: " +
            "set admin.token (or admin.token: env:NAME) to use it remotely.",
          { type: "permission_error", code: "admin_loopback_only" },
        );
      }
      const host = c.req.header("host");
      const origin = c.req.header("origin");
      if (
        (host !== undefined && !isLoopbackAuthority(host)) ||
        (origin !== undefined && !isLoopbackOrigin(origin))
      ) {
        return openAIError(
          403,
          "Without admin.token the admin API takes requests addressed to a loopback host and " +
            "not sent from web pages; set admin.token to call it otherwise.",
          { type: "permission_error", code: "admin_loopback_only" },
        );
      }
      return await next();
    }
    const presented = bearerToken(c.req.header("authorization"));
    if (presented === undefined || !tokensEqual(presented, token)) {
      return openAIError(
        401,
        presented === undefined
          ? "Missing admin token: send 'Authorization: Bearer <admin.token>'."
          : "Invalid admin token.",
        {
          type: "authentication_error",
          code: "invalid_admin_token",
          headers: { "www-authenticate": 'Bearer realm="tidegate-admin"' },
        },
      );
    }
    return await next();
  };
}

/** The token of an `Authorization: Bearer <token>` header, if it is one. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = header?.match(/^Bearer[ \t]+(\S+)[ \t]*$/i);
  return match?.[1];
}

/**
 * Compares two secrets in time independent of where they differ and of their lengths: both are
 * hashed first, so the compared buffers always have equal length.
 */
export function tokensEqual(presented: string, expected: string): boolean {
  const a = createHash("sha256").update(presented).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

/** A client on this machine: no address (in-process), a Unix socket, or a loopback IP. */
export function isLoopback(addr: Deno.Addr | undefined): boolean {
  if (addr === undefined) return true;
  if (addr.transport === "tcp" || addr.transport === "udp") return isLoopbackHost(addr.hostname);
  return addr.transport === "unix" || addr.transport === "unixpacket";
}

/** A `Host` header naming this machine: localhost or a loopback IP, with an optional port. */
export function isLoopbackAuthority(authority: string): boolean {
  const host = authority.trim().toLowerCase().replace(/^(\[[^\]]*\]|[^:]*)(:\d*)?$/, "$1");
  return host === "localhost" || host.endsWith(".localhost") || isLoopbackHost(host);
}

/** An `Origin` of a page served from this machine (`null` and foreign origins are not). */
export function isLoopbackOrigin(origin: string): boolean {
  try {
    return isLoopbackAuthority(new URL(origin).host);
  } catch {
    return false;
  }
}

export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (host === "::1" || host === "0:0:0:0:0:0:0:1") return true;
  const v4 = host.startsWith("::ffff:") ? host.slice(7) : host;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/**
 * Who may see the dashboard: the admin rule (src/admin/auth.ts: a bearer token when
 * `admin.token` is set, else loopback clients addressing a loopback host), plus a way in for a
 * browser when a token is set: open `/dashboard?token=<admin token>` once, get an HttpOnly cookie
 * and a redirect to the URL without the token.
 *
 * The cookie holds HMAC(token, purpose), not the token: it opens the dashboard only (never the
 * admin API), and rotating the token invalidates it.
 */
import { createHmac } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { tokensEqual } from "../admin/auth.ts";
import { openAIError } from "../openai/errors.ts";

export const DASHBOARD_COOKIE = "tidegate_dashboard";
const COOKIE_PURPOSE = "tidegate dashboard cookie v1";
const COOKIE_MAX_AGE_S = 12 * 3600;

export interface DashboardAccessRequest {
  /** The `Cookie` header. */
  cookie?: string | null;
  /** The `token` query parameter. */
  queryToken?: string | null;
}

export type DashboardAccess =
  /** A valid session cookie. */
  | { kind: "allow" }
  /** A valid `?token=`: set this cookie and redirect to the URL without the token. */
  | { kind: "set_cookie"; cookieValue: string }
  /** A wrong `?token=`. */
  | { kind: "deny"; message: string }
  /** Not settled by the cookie rule: the admin middleware decides (bearer token or loopback). */
  | { kind: "delegate" };

/** Pure: the cookie rule for one request, given the configured admin token (if any). */
export function decideDashboardAccess(
  request: DashboardAccessRequest,
  token: string | undefined,
): DashboardAccess {
  if (!token) return { kind: "delegate" };
  if (request.queryToken) {
    return tokensEqual(request.queryToken, token)
      ? { kind: "set_cookie", cookieValue: dashboardCookieValue(token) }
      : { kind: "deny", message: "The token in the URL is not the admin token." };
  }
  const cookie = readCookie(request.cookie, DASHBOARD_COOKIE);
  if (cookie && tokensEqual(cookie, dashboardCookieValue(token))) return { kind: "allow" };
  return { kind: "delegate" };
}

export function dashboardCookieValue(token: string): string {
  return createHmac("sha256", token).update(COOKIE_PURPOSE).digest("hex");
}

function readCookie(header: string | null | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export interface DashboardAuthOptions {
  /** The admin token, read per request (a config reload may change it). */
  token: () => string | undefined;
  /** The admin auth middleware (src/admin/auth.ts) for requests the cookie rule leaves open. */
  // deno-lint-ignore no-explicit-any
  adminAuth: MiddlewareHandler<any>;
}

// deno-lint-ignore no-explicit-any
export function dashboardAuth(options: DashboardAuthOptions): MiddlewareHandler<any> {
  return async (c, next) => {
    const url = new URL(c.req.url);
    const access = decideDashboardAccess({
      cookie: c.req.header("cookie"),
      queryToken: url.searchParams.get("token"),
    }, options.token());
    switch (access.kind) {
      case "delegate":
        return options.adminAuth(c, next);
      case "allow":
        await next();
        return;
      case "deny":
        return openAIError(401, access.message, {
          type: "authentication_error",
          code: "invalid_admin_token",
        });
      case "set_cookie": {
        url.searchParams.delete("token");
        const secure = url.protocol === "https:" ||
          c.req.header("x-forwarded-proto")?.split(",")[0].trim() === "https";
        // Relative Location: correct behind a proxy that mounts the router under a prefix.
        const last = url.pathname.slice(url.pathname.lastIndexOf("/") + 1) || ".";
        return new Response(null, {
          status: 303,
          headers: {
            location: `${last}${url.search}`,
            "set-cookie": `${DASHBOARD_COOKIE}=${access.cookieValue}; Path=/dashboard; ` +
              `Max-Age=${COOKIE_MAX_AGE_S}; HttpOnly; SameSite=Lax${secure ? "; Secure" : ""}`,
            "cache-control": "no-store",
            "referrer-policy": "no-referrer",
          },
        });
      }
    }
  };
}

import { dashboardCookieValue, decideDashboardAccess } from "../../src/dashboard/dashboard_auth.ts";
import { assert, assertEquals } from "../assert.ts";

const TOKEN = "s3cret-admin-token";

Deno.test("with a token, a valid ?token= earns the session cookie and the cookie opens the dashboard", () => {
  assertEquals(decideDashboardAccess({ queryToken: TOKEN }, TOKEN), {
    kind: "set_cookie",
    cookieValue: dashboardCookieValue(TOKEN),
  });
  const cookie = `theme=dark; tidegate_dashboard=${dashboardCookieValue(TOKEN)}`;
  assertEquals(decideDashboardAccess({ cookie }, TOKEN), { kind: "allow" });
});

Deno.test("a wrong ?token= is refused; a wrong or missing cookie leaves the decision to the admin rule", () => {
  assertEquals(decideDashboardAccess({ queryToken: "nope" }, TOKEN).kind, "deny");
  for (
    const cookie of [
      undefined,
      `tidegate_dashboard=${dashboardCookieValue("old-token")}`,
      `tidegate_dashboard=${TOKEN}`,
      `other_tidegate_dashboard=${dashboardCookieValue(TOKEN)}`,
    ]
  ) {
    assertEquals(decideDashboardAccess({ cookie }, TOKEN), { kind: "delegate" }, cookie);
  }
});

Deno.test("without a token, cookies and ?token= mean nothing: the admin rule (loopback) decides", () => {
  assertEquals(decideDashboardAccess({ queryToken: "x" }, undefined), { kind: "delegate" });
  assertEquals(
    decideDashboardAccess({ cookie: `tidegate_dashboard=${dashboardCookieValue("")}` }, undefined),
    { kind: "delegate" },
  );
});

Deno.test("the session cookie is derived from the token and does not reveal it", () => {
  const value = dashboardCookieValue(TOKEN);
  assert(/^[0-9a-f]{64}$/.test(value), value);
  assert(!value.includes(TOKEN));
  assert(value !== dashboardCookieValue(`${TOKEN}x`), "a new token invalidates old cookies");
});

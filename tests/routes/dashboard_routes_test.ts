import { Hono } from "hono";
import { DashboardTraffic } from "../../src/telemetry/dashboard_traffic.ts";
import { TtftTimeline } from "../../src/telemetry/ttft_timeline.ts";
import { dashboardRoutes } from "../../routes/dashboard.ts";
import { parsePrometheusText } from "../../src/cluster/prometheus_text.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { dashboardCookieValue } from "../../src/dashboard/dashboard_auth.ts";
import { createRouter, type Router } from "../../routes/app.ts";
import type { DashboardData } from "../../src/telemetry/dashboard_data.ts";
import { assert, assertEquals, assertMatch } from "../assert.ts";
import { completion, range, startTestCluster } from "../support/harness.ts";
import { finishedRecord } from "../telemetry/records.ts";

const TOKEN = "route-test-token";

/** A router in front of two instances nobody calls (no background work, no sockets). */
function quietRouter(token?: string): Promise<Router> {
  return createRouter(
    resolveConfig({
      listen: { port: 0 },
      ...(token ? { admin: { token } } : {}),
      models: [{
        name: "m",
        tokenizer: { mode: "none" },
        kv: { store: "none" },
        instances: [
          { id: "a", url: "http://127.0.0.1:9" },
          { id: "b", url: "http://127.0.0.1:10" },
        ],
      }],
    }),
    { background: false, log: () => {} },
  );
}

/** A request as Deno.serve hands it over: with the client's address as the second argument. */
function get(
  app: { fetch: Hono["fetch"] },
  path: string,
  options: { remote?: string; host?: string; headers?: Record<string, string> } = {},
): Promise<Response> {
  const host = options.host ?? "127.0.0.1:8080";
  const request = new Request(`http://${host}${path}`, { headers: { host, ...options.headers } });
  const info = {
    remoteAddr: { hostname: options.remote ?? "127.0.0.1", port: 40000, transport: "tcp" },
  };
  return Promise.resolve(app.fetch(request, info));
}

Deno.test("GET /dashboard serves the page, its script, module and styles under a strict CSP", async () => {
  const router = await quietRouter();
  const page = await get(router.app, "/dashboard");
  assertEquals(page.status, 200);
  assertMatch(page.headers.get("content-type")!, /^text\/html/);
  const csp = page.headers.get("content-security-policy")!;
  assertMatch(csp, /script-src 'self'/);
  assertMatch(csp, /frame-ancestors 'none'/);
  assert(!csp.includes("unsafe-inline"), "no inline scripts or styles allowed");
  const html = await page.text();
  assertMatch(html, /<script type="module" src="dashboard\/app.js"><\/script>/);
  assert(!/<script>/.test(html), "the page has no inline script");
  for (
    const [path, type, marker] of [
      ["/dashboard/app.js", "text/javascript", 'from "./dashboard_view.js"'],
      ["/dashboard/dashboard_view.js", "text/javascript", "export function ttftChartGeometry"],
      ["/dashboard/app.css", "text/css", ":root"],
    ]
  ) {
    const response = await get(router.app, path);
    assertEquals(response.status, 200, path);
    assertMatch(response.headers.get("content-type")!, new RegExp(`^${type}`));
    assert((await response.text()).includes(marker), `${path} contains ${marker}`);
  }
  const slash = await get(router.app, "/dashboard/");
  assertEquals([slash.status, slash.headers.get("location")], [308, "../dashboard"]);
  await router.close();
});

Deno.test("GET /dashboard/data answers every instance, the store and a bounded list of decisions", async () => {
  const router = await quietRouter();
  for (let i = 0; i < 250; i++) {
    router.decisions.onFinished(finishedRecord({ instance: "a", local: { a: 0, b: 0 } }));
  }
  const response = await get(router.app, "/dashboard/data");
  assertEquals(response.status, 200);
  assertEquals(response.headers.get("cache-control"), "no-store");
  const data = await response.json() as DashboardData;
  assertEquals(data.models.map((m) => [m.name, m.instances.map((i) => i.id), m.store]), [
    ["m", ["a", "b"], null],
  ]);
  assertEquals(data.decisions.length, 20, "20 decisions by default");
  const count = async (query: string) =>
    ((await (await get(router.app, `/dashboard/data?decisions=${query}`)).json()) as DashboardData)
      .decisions.length;
  assertEquals(await count("0"), 0);
  assertEquals(await count("5"), 5);
  assertEquals(await count("100000"), 200);
  assertEquals(await count("lots"), 20);
  await router.close();
});

Deno.test("without admin.token, the dashboard is refused to remote clients and foreign Host names", async () => {
  const router = await quietRouter();
  for (const path of ["/dashboard", "/dashboard/data", "/dashboard/app.js"]) {
    const remote = await get(router.app, path, { remote: "10.0.0.9" });
    assertEquals(remote.status, 403, path);
    assertMatch((await remote.json()).error.message, /admin\.token/);
  }
  const rebound = await get(router.app, "/dashboard/data", { host: "attacker.example:8080" });
  assertEquals(rebound.status, 403);
  await rebound.body?.cancel();
  const local = await get(router.app, "/dashboard/data", { host: "localhost:8080", remote: "::1" });
  assertEquals(local.status, 200);
  await local.body?.cancel();
  await router.close();
});

Deno.test("with admin.token, ?token= once sets an HttpOnly cookie that opens the dashboard", async () => {
  const router = await quietRouter(TOKEN);
  for (const remote of ["127.0.0.1", "10.0.0.9"]) {
    const bare = await get(router.app, "/dashboard", { remote });
    assertEquals(bare.status, 401, "a token is needed even from loopback");
    assertMatch(bare.headers.get("www-authenticate")!, /^Bearer/);
    await bare.body?.cancel();
  }
  const wrongBearer = await get(router.app, "/dashboard/data", {
    headers: { authorization: "Bearer nope" },
  });
  assertEquals(wrongBearer.status, 401);
  await wrongBearer.body?.cancel();
  assertEquals((await get(router.app, "/dashboard?token=wrong")).status, 401);

  const login = await get(router.app, `/dashboard?decisions=5&token=${TOKEN}`);
  assertEquals(login.status, 303);
  assertEquals(login.headers.get("location"), "dashboard?decisions=5", "the token leaves the URL");
  const cookie = login.headers.get("set-cookie")!;
  assertMatch(
    cookie,
    /^tidegate_dashboard=[0-9a-f]{64}; Path=\/dashboard; Max-Age=\d+; HttpOnly; SameSite=Lax$/,
  );
  assert(!cookie.includes(TOKEN));
  const behindTls = await get(router.app, `/dashboard?token=${TOKEN}`, {
    headers: { "x-forwarded-proto": "https" },
  });
  assertMatch(behindTls.headers.get("set-cookie")!, /; Secure$/);

  const withCookie = await get(router.app, "/dashboard/data", {
    remote: "10.0.0.9",
    headers: { cookie: `tidegate_dashboard=${dashboardCookieValue(TOKEN)}` },
  });
  assertEquals(withCookie.status, 200);
  await withCookie.body?.cancel();
  const withBearer = await get(router.app, "/dashboard/data", {
    remote: "10.0.0.9",
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  assertEquals(withBearer.status, 200);
  await withBearer.body?.cancel();
  await router.close();
});

Deno.test("an admin middleware given to dashboardRoutes decides what the cookie rule leaves open", async () => {
  const router = await quietRouter();
  const app = new Hono().route(
    "/",
    dashboardRoutes(router.registry, {
      decisions: router.decisions,
      traffic: new DashboardTraffic(),
      timeline: new TtftTimeline(),
      adminAuth: async (c, next) => {
        if (c.req.header("x-admin") !== "yes") {
          return c.text("refused by the admin middleware", 418);
        }
        await next();
      },
    }),
  );
  assertEquals((await get(app, "/dashboard/data", { remote: "127.0.0.1" })).status, 418);
  const allowed = await get(app, "/dashboard/data", {
    remote: "10.0.0.9",
    headers: { "x-admin": "yes" },
  });
  assertEquals(allowed.status, 200);
  await allowed.body?.cancel();
  await router.close();
});

Deno.test("after real traffic, /dashboard/data shows per instance the hit ratios /metrics exposes", async () => {
  const cluster = await startTestCluster({
    engines: 2,
    engine: {
      cachedTokens: (body) => ((body as { prompt: number[] }).prompt.length >= 64 ? 32 : 0),
    },
  });
  try {
    const prompts = [range(0, 64), range(1000, 64), range(0, 80), range(5000, 48)];
    cluster.hold(1, prompts[0], 3);
    for (const prompt of [...prompts, ...prompts]) {
      // Streamed with usage: TTFT and the engine's cached tokens are both observable.
      const response = await completion(cluster.url, {
        prompt,
        stream: true,
        stream_options: { include_usage: true },
      });
      assertEquals(response.status, 200);
      await response.text();
    }
    const data = await (await fetch(`${cluster.url}/dashboard/data`)).json() as DashboardData;
    const samples =
      parsePrometheusText(await (await fetch(`${cluster.url}/metrics`)).text()).samples;
    const total = (name: string, instance: string, scope?: string) =>
      samples.filter((s) =>
        s.name === name && s.labels.instance === instance &&
        (scope === undefined || s.labels.scope === scope)
      ).reduce((sum, s) => sum + s.value, 0);
    let requests = 0;
    for (const instance of data.models[0].instances) {
      const prompt = total("tidegate_prompt_tokens_total", instance.id);
      assertEquals(instance.requests, total("tidegate_requests_total", instance.id));
      assertEquals(instance.promptTokens, prompt);
      assertEquals(
        instance.predictedHitRatio,
        prompt ? total("tidegate_predicted_hit_tokens_total", instance.id, "local") / prompt : null,
      );
      const reported = total("tidegate_engine_reported_prompt_tokens_total", instance.id);
      assertEquals(
        instance.engineHitRatio,
        reported ? total("tidegate_engine_cached_tokens_total", instance.id) / reported : null,
      );
      requests += instance.requests;
    }
    assertEquals(requests, 8);
    assert(
      data.models[0].instances.some((i) => (i.predictedHitRatio ?? 0) > 0),
      "the held prefix shows up as a predicted hit",
    );
    assertEquals(data.ttft.series.map((s) => [s.arm, s.window?.count]), [["default", 8]]);
    assertEquals(data.decisions.length, 8);
  } finally {
    await cluster.close();
  }
});

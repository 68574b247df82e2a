import { Hono } from "hono";
import { assert, assertEquals } from "../assert.ts";
import {
  adminAuth,
  bearerToken,
  type ConnectionEnv,
  isLoopback,
  tokensEqual,
} from "../../src/admin/auth.ts";

const tcp = (hostname: string): Deno.NetAddr => ({ transport: "tcp", hostname, port: 40000 });

function guarded(token: string | undefined) {
  const app = new Hono<{ Bindings: ConnectionEnv }>();
  app.use("/admin/*", adminAuth({ token: () => token }));
  app.get("/admin/ping", (c) => c.json({ ok: true }));
  app.post("/admin/ping", (c) => c.json({ ok: true }));
  return (
    path: string,
    options: { from?: Deno.Addr; headers?: Record<string, string>; method?: string } = {},
  ) =>
    app.fetch(
      new Request(`http://router${path}`, {
        method: options.method ?? "GET",
        headers: options.headers,
      }),
      options.from ? { remoteAddr: options.from } : undefined,
    );
}

Deno.test("tokensEqual() accepts only the exact token, whatever the lengths", () => {
  assert(tokensEqual("s3cret-token", "s3cret-token"));
  assert(!tokensEqual("s3cret-tokem", "s3cret-token"));
  assert(!tokensEqual("s3cret", "s3cret-token"));
  assert(!tokensEqual("", "s3cret-token"));
});

Deno.test("bearerToken() reads 'Bearer <token>' case-insensitively and nothing else", () => {
  assertEquals(bearerToken("Bearer abc.def"), "abc.def");
  assertEquals(bearerToken("bearer  abc "), "abc");
  assertEquals(bearerToken("Basic abc"), undefined);
  assertEquals(bearerToken("Bearer"), undefined);
  assertEquals(bearerToken("Bearer a b"), undefined);
  assertEquals(bearerToken(undefined), undefined);
});

Deno.test("isLoopback() knows 127.0.0.0/8, ::1, mapped IPv4, Unix sockets and in-process calls", () => {
  for (const host of ["127.0.0.1", "127.3.4.5", "::1", "::ffff:127.0.0.1"]) {
    assert(isLoopback(tcp(host)), host);
  }
  for (const host of ["10.0.0.1", "128.0.0.1", "::ffff:10.0.0.1", "fe80::1", "0.0.0.0"]) {
    assert(!isLoopback(tcp(host)), host);
  }
  assert(isLoopback({ transport: "unix", path: "/run/tidegate.sock" }));
  assert(isLoopback(undefined), "no address: an in-process request");
});

Deno.test("with a token configured the admin API wants it as a bearer token, from anywhere", async () => {
  const request = guarded("s3cret");
  const missing = await request("/admin/ping", { from: tcp("127.0.0.1") });
  assertEquals(missing.status, 401);
  assertEquals(missing.headers.get("www-authenticate"), 'Bearer realm="tidegate-admin"');
  const body = await missing.json();
  assertEquals(Object.keys(body.error).sort(), ["code", "message", "param", "type"]);
  assertEquals(body.error.code, "invalid_admin_token");

  const wrong = await request("/admin/ping", { headers: { authorization: "Bearer s3creT" } });
  assertEquals(wrong.status, 401);
  assertEquals((await wrong.json()).error.message, "Invalid admin token.");

  const right = await request("/admin/ping", {
    from: tcp("203.0.113.9"),
    headers: { authorization: "Bearer s3cret" },
  });
  assertEquals(right.status, 200);
  assertEquals(await right.json(), { ok: true });
});

Deno.test("without a token the admin API answers loopback clients only", async () => {
  const request = guarded(undefined);
  assertEquals((await request("/admin/ping", { from: tcp("127.0.0.1") })).status, 200);
  assertEquals((await request("/admin/ping", { from: tcp("::1") })).status, 200);
  assertEquals((await request("/admin/ping")).status, 200, "in-process");
  const remote = await request("/admin/ping", { from: tcp("192.168.1.20") });
  assertEquals(remote.status, 403);
  assertEquals((await remote.json()).error.code, "admin_loopback_only");
});

Deno.test("without a token a loopback request naming a foreign host or sent by a web page is refused", async () => {
  const request = guarded(undefined);
  const local = { from: tcp("127.0.0.1") };
  const ok = await request("/admin/ping", {
    ...local,
    headers: { host: "127.0.0.1:8080", origin: "http://localhost:3000" },
  });
  assertEquals(ok.status, 200);
  const rebound = await request("/admin/ping", {
    ...local,
    headers: { host: "evil.example:8080" },
  });
  assertEquals(rebound.status, 403, "DNS rebinding");
  const csrf = await request("/admin/ping", {
    ...local,
    method: "POST",
    headers: { host: "127.0.0.1:8080", origin: "https://evil.example" },
  });
  assertEquals(csrf.status, 403, "cross-site form post");
});

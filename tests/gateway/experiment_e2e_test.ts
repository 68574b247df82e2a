import { assert, assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { OPERATOR_TOKEN_HEADER } from "../../src/experiment/experiment_arms.ts";
import type { ModelExperimentReport } from "../../src/experiment/experiment_observer.ts";
import {
  completion,
  MODEL,
  range,
  startTestCluster,
  type TestCluster,
} from "../support/harness.ts";

const EXPERIMENT = {
  key: "header:x-session-id",
  overrideHeader: "x-tidegate-arm",
  arms: [
    { name: "A", policy: "cache_aware", weight: 1 },
    { name: "B", policy: "least_load", weight: 1 },
  ],
};

function start(): Promise<TestCluster> {
  return startTestCluster({
    model: { experiment: EXPERIMENT },
    top: { admin: { token: "secret" } },
  });
}

/** The admin API over HTTP with the admin token. */
function admin(t: TestCluster) {
  return {
    request: (path: string, init: RequestInit = {}) =>
      fetch(`${t.url}/admin${path}`, {
        ...init,
        headers: { authorization: "Bearer secret", ...init.headers },
      }),
  };
}

async function send(t: TestCluster, session: number, headers: Record<string, string> = {}) {
  // Streamed: only a stream has an observable first token (TTFT) to compare arms by.
  const response = await completion(t.url, {
    prompt: range(session * 100, 40),
    stream: true,
    stream_options: { include_usage: true },
  }, {
    "x-session-id": `session-${session}`,
    ...headers,
  });
  await response.text();
  return response;
}

async function report(t: TestCluster): Promise<ModelExperimentReport> {
  const response = await admin(t).request("/experiments");
  assertEquals(response.status, 200);
  const body = await response.json();
  assertEquals(body.experiments.length, 1);
  return body.experiments[0];
}

Deno.test("each session keeps its arm, both arms get traffic, and /admin/experiments adds up", async () => {
  const t = await start();
  try {
    const armOf = new Map<number, string>();
    for (let round = 0; round < 2; round++) {
      for (let session = 0; session < 20; session++) {
        const response = await send(t, session);
        assertEquals(response.status, 200);
        const arm = response.headers.get("x-tidegate-arm")!;
        if (round === 0) armOf.set(session, arm);
        else assertEquals(arm, armOf.get(session), `session ${session} changed arm`);
      }
    }
    const perArm = { A: 0, B: 0 } as Record<string, number>;
    for (const arm of armOf.values()) perArm[arm] += 2;
    assert(perArm.A > 0 && perArm.B > 0, JSON.stringify(perArm));

    const r = await report(t);
    assertEquals(r.model, MODEL);
    assertEquals(r.control, "A");
    assertEquals(r.arms.map((a) => [a.name, a.policy, a.requests]), [
      ["A", "cache_aware", perArm.A],
      ["B", "least_load", perArm.B],
    ]);
    assertEquals(r.arms.reduce((sum, a) => sum + a.ttft.n, 0), 40);
    assert(r.ttftBasis.startsWith("streamed requests only"), r.ttftBasis);
    for (const arm of r.arms) {
      assert(arm.ttft.mean! > 0 && arm.ttft.p50! > 0, JSON.stringify(arm.ttft));
      assertEquals([arm.rejected, arm.errors], [0, 0]);
      assert(arm.hitRatio !== null);
    }
    assertEquals(r.comparisons[0].n, { arm: perArm.B, control: perArm.A });
    assertEquals(r.verdict.length, 1);
    assert(r.verdict[0].startsWith("arm B vs A: not enough data yet"), r.verdict[0]);

    const one = await admin(t).request(`/experiments/${MODEL}`);
    assertEquals((await one.json()).version, r.version);
    const missing = await admin(t).request("/experiments/nope");
    await missing.body?.cancel();
    assertEquals(missing.status, 404);
    const anonymous = await fetch(`${t.url}/admin/experiments`);
    await anonymous.body?.cancel();
    assertEquals(anonymous.status, 401);
  } finally {
    await t.close();
  }
});

Deno.test("x-tidegate-arm is on error answers: 'none' before the model resolves, the arm after", async () => {
  const t = await start();
  try {
    const unknown = await completion(t.url, { model: "nope", prompt: [1, 2, 3] });
    await unknown.body?.cancel();
    assertEquals([unknown.status, unknown.headers.get("x-tidegate-arm")], [404, "none"]);
    const invalid = await fetch(`${t.url}/v1/completions`, { method: "POST", body: "{" });
    await invalid.body?.cancel();
    assertEquals([invalid.status, invalid.headers.get("x-tidegate-arm")], [400, "none"]);

    for (const engine of t.engines) await engine.setFailure("http500");
    const failed = await send(t, 3);
    assert(failed.status >= 500, String(failed.status));
    assert(["A", "B"].includes(failed.headers.get("x-tidegate-arm")!));
    const r = await report(t);
    const arm = r.arms.find((a) => a.name === failed.headers.get("x-tidegate-arm"))!;
    assertEquals([arm.requests, arm.errors], [1, 1]);
  } finally {
    await t.close();
  }
});

Deno.test("an operator override picks the arm, is not forwarded, and stays out of the stats", async () => {
  const t = await start();
  try {
    const natural = (await send(t, 7)).headers.get("x-tidegate-arm")!;
    const other = natural === "A" ? "B" : "A";
    const ignored = await send(t, 7, { "x-tidegate-arm": other });
    assertEquals(ignored.headers.get("x-tidegate-arm"), natural);
    const forced = await send(t, 7, { "x-tidegate-arm": other, [OPERATOR_TOKEN_HEADER]: "secret" });
    assertEquals(forced.headers.get("x-tidegate-arm"), other);
    const bad = await send(t, 7, { "x-tidegate-arm": "Z", [OPERATOR_TOKEN_HEADER]: "secret" });
    assertEquals([bad.status, bad.headers.get("x-tidegate-arm")], [400, "none"]);

    const seen = t.engines.flatMap((e) => e.stats.requests);
    assertEquals(seen.length, 3);
    for (const request of seen) {
      assertEquals(request.headers[OPERATOR_TOKEN_HEADER], undefined);
      assertEquals(request.headers["x-tidegate-arm"], undefined);
      assertEquals(request.headers["x-session-id"], "session-7");
    }
    const r = await report(t);
    const forcedArm = r.arms.find((a) => a.name === other)!;
    assertEquals([forcedArm.requests, forcedArm.overridden, forcedArm.ttft.n], [1, 1, 0]);
  } finally {
    await t.close();
  }
});

Deno.test("PUT /admin/experiments/:model changes the arms at runtime, counted in metrics", async () => {
  const t = await start();
  try {
    for (let s = 0; s < 6; s++) await send(t, s);
    const before = await report(t);
    const put = await admin(t).request(`/experiments/${MODEL}`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        key: "header:x-session-id",
        arms: [{ name: "A", policy: "cache_aware" }, { name: "C", policy: "round_robin" }],
      }),
    });
    assertEquals(put.status, 200);
    const changed = await put.json();
    assert(changed.version > before.version);
    assertEquals(changed.source, "admin");
    assert(t.logs.some((l) => l.message === "experiment arms changed"));

    const arms = new Set<string>();
    for (let s = 0; s < 12; s++) arms.add((await send(t, s)).headers.get("x-tidegate-arm")!);
    assertEquals([...arms].sort(), ["A", "C"]);
    const after = await report(t);
    assertEquals(after.arms.map((a) => a.name), ["A", "C"]);
    // Statistics restart with the new arms: only the 12 requests since the change.
    assertEquals(after.arms.reduce((sum, a) => sum + a.requests, 0), 12);

    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assert(
      metrics.includes(`tidegate_experiment_changes_total{model="${MODEL}"} 1`),
      metrics.split("\n").filter((l) => l.includes("experiment")).join("\n"),
    );

    const invalid = await admin(t).request(`/experiments/${MODEL}`, {
      method: "PUT",
      body: JSON.stringify({ arms: [{ name: "A", policy: "fastest" }] }),
    });
    assertEquals(invalid.status, 400);
    const problems: string[] = (await invalid.json()).error.problems;
    assert(problems.some((p) => p.includes("at least two arms")), problems.join("; "));

    const ended = await admin(t).request(`/experiments/${MODEL}`, { method: "DELETE" });
    assertEquals((await ended.json()).experiment, null);
    assertEquals((await send(t, 1)).headers.get("x-tidegate-arm"), "default");
    assertEquals((await (await admin(t).request("/experiments")).json()).experiments, []);
  } finally {
    await t.close();
  }
});

Deno.test("a config reload that changes the experiment swaps the arms; one that does not keeps admin changes", async () => {
  const t = await start();
  try {
    const withExperiment = (experiment: unknown) => {
      const raw = JSON.parse(JSON.stringify(t.router.config));
      raw.models[0].experiment = experiment;
      return resolveConfig(raw);
    };
    const first = t.router.experiments.arms.get(MODEL)!;
    const reloaded = await t.router.reload(withExperiment({
      ...EXPERIMENT,
      arms: [...EXPERIMENT.arms, { name: "C", policy: "power_of_two", weight: 2 }],
    }));
    assert(reloaded.ok, JSON.stringify(reloaded));
    const live = t.router.experiments.arms.get(MODEL)!;
    assert(live.version > first.version);
    assertEquals([live.source, live.arms.map((a) => a.name)], ["reload", ["A", "B", "C"]]);
    const arms = new Set<string>();
    for (let s = 0; s < 30; s++) arms.add((await send(t, s)).headers.get("x-tidegate-arm")!);
    assert(arms.has("C"), [...arms].join());

    // An admin change, then a reload that leaves the experiment section alone: the change stays.
    const put = await admin(t).request(`/experiments/${MODEL}`, {
      method: "PUT",
      body: JSON.stringify({
        arms: [{ name: "A", policy: "random" }, { name: "D", policy: "random" }],
      }),
    });
    await put.body?.cancel();
    const raw = JSON.parse(JSON.stringify(t.router.config));
    raw.limits.maxRetries = 1;
    assert((await t.router.reload(resolveConfig(raw))).ok);
    assertEquals(t.router.experiments.arms.get(MODEL)!.arms.map((a) => a.name), ["A", "D"]);
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assert(metrics.includes(`tidegate_experiment_changes_total{model="${MODEL}"} 2`), metrics);
  } finally {
    await t.close();
  }
});

Deno.test("a 429 from admission carries the arm and counts as that arm's rejection", async () => {
  const t = await startTestCluster({
    model: { experiment: EXPERIMENT, slo: { ttftS: 1e-9, admission: true } },
    top: { admin: { token: "secret" } },
  });
  try {
    const response = await send(t, 5);
    assertEquals(response.status, 429);
    const arm = response.headers.get("x-tidegate-arm")!;
    assert(["A", "B"].includes(arm), arm);
    const r = await report(t);
    const row = r.arms.find((a) => a.name === arm)!;
    assertEquals([row.requests, row.rejected, row.ttft.n], [1, 1, 0]);
  } finally {
    await t.close();
  }
});

Deno.test("non-streamed requests count for their arm but add no TTFT sample", async () => {
  const t = await start();
  try {
    const response = await completion(t.url, { prompt: range(0, 40) }, {
      "x-session-id": "plain",
    });
    assertEquals(response.status, 200);
    await response.json();
    const r = await report(t);
    assertEquals(r.arms.reduce((sum, a) => sum + a.requests, 0), 1);
    assertEquals(r.arms.reduce((sum, a) => sum + a.ttft.n, 0), 0);
  } finally {
    await t.close();
  }
});

Deno.test("PUT /admin/experiments/:model takes the section wrapped as the config file and docs/experiments write it", async () => {
  const t = await start();
  try {
    const file = JSON.parse(
      await Deno.readTextFile(
        new URL("../../docs/experiments/cache_aware_vs_mooncake_ttft.json", import.meta.url),
      ),
    );
    assert(Object.hasOwn(file, "experiment"), "the docs' file is the wrapped form");
    const put = await admin(t).request(`/experiments/${MODEL}`, {
      method: "PUT",
      body: JSON.stringify(file),
    });
    assertEquals(put.status, 200, await put.clone().text());
    const live = await put.json();
    assertEquals(
      live.experiment.arms.map((a: { name: string }) => a.name),
      file.experiment.arms.map((a: { name: string }) => a.name),
    );

    const stray = await admin(t).request(`/experiments/${MODEL}`, {
      method: "PUT",
      body: JSON.stringify({ ...file, arm: "A" }),
    });
    assertEquals(stray.status, 400);
    const problems: string[] = (await stray.json()).error.problems;
    assert(problems.some((p) => p.startsWith("arm: unknown field")), problems.join("; "));

    const ended = await admin(t).request(`/experiments/${MODEL}`, {
      method: "PUT",
      body: JSON.stringify({ experiment: null }),
    });
    assertEquals((await ended.json()).experiment, null);
  } finally {
    await t.close();
  }
});

/**
 * Two router processes (`deno run -A cli/main.ts start`) in front of one fake cluster: each sees its
 * own dispatches at once and the other's through the engines' load reports.
 */
import { assert, assertEquals } from "../assert.ts";
import { startFakeEngine } from "../../src/fakes/fake_engine.ts";
import { completion, loadOnlyModel, range } from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";
import {
  type RouterProcess,
  startRouterProcess,
  writeRouterConfig,
} from "../support/router_process.ts";

const MODEL = "shared-model";
const PROMPT = 3000; // tokens per request; ~4 s of prefill each at the time scale below
const POLL_MS = 200;
interface View {
  id: string;
  engineReport: { ageMs: number | null } | null;
  load: { waitingPrefillTokens: number; basis: string; terms: { ourPrefillTokens: number } };
}

async function views(router: RouterProcess): Promise<Map<string, View>> {
  const body = await (await fetch(`${router.url}/admin/instances`)).json();
  return new Map(body.models[0].instances.map((v: View) => [v.id, v]));
}

Deno.test("two router processes on one cluster agree on every instance's waiting prefill after one poll", async () => {
  const slow = { model: MODEL, timeScale: 12, decodeSecondsPerToken: 0.001 };
  const engines = [
    startFakeEngine({ id: "s0", flavour: "sglang", ...slow }),
    startFakeEngine({ id: "s1", flavour: "sglang", ...slow }),
    startFakeEngine({ id: "v0", flavour: "vllm", ...slow }),
  ];
  const config = await writeRouterConfig({
    models: [loadOnlyModel(MODEL, {
      policy: "least_load",
      health: { intervalMs: 5_000, timeoutMs: 500 },
      load: { pollIntervalMs: POLL_MS, staleAfterMs: 5_000 },
      instances: engines.map((e) => ({ id: e.id, url: e.url, engine: e.flavour })),
    })],
  });
  const routers: RouterProcess[] = [];
  const requests: Promise<unknown>[] = [];
  try {
    routers.push(
      ...await Promise.all([config.path, config.path].map((path) => startRouterProcess(path))),
    );
    const [a, b] = routers;
    const send = (router: RouterProcess, i: number) =>
      requests.push(
        completion(router.url, { model: MODEL, prompt: range(i * 10_000, PROMPT), max_tokens: 2 })
          .then((r) => r.body?.cancel()).catch(() => {}),
      );
    // Router A sends 5 requests, router B 2: neither's own account shows the whole picture.
    for (let i = 0; i < 5; i++) send(a, i);
    for (let i = 5; i < 7; i++) send(b, i);
    await eventually(
      () => engines.reduce((n, e) => n + e.load().waiting + e.load().prefilling, 0) === 7,
      5_000,
      "every request to reach its engine",
    );
    // One poll by each router while no request changed state on any engine (a prefill ending
    // between the two routers' polls would part them by a prompt more than the one in progress,
    // which a busy machine's slow polls allow): every report younger than that window's start.
    const states = () => engines.map((e) => `${e.load().waiting}/${e.load().prefilling}`).join();
    let windowStart = performance.now();
    let before = states();
    let viewA = new Map<string, View>();
    let viewB = new Map<string, View>();
    const polledSince = (view: Map<string, View>) =>
      [...view.values()].every((v) =>
        (v.engineReport?.ageMs ?? Infinity) < performance.now() - windowStart
      );
    const changed = () => {
      if (states() === before) return false;
      [before, windowStart] = [states(), performance.now()];
      return true;
    };
    await eventually(
      async () => {
        if (changed()) return false;
        [viewA, viewB] = await Promise.all([views(a), views(b)]);
        return polledSince(viewA) && polledSince(viewB) && !changed();
      },
      15_000,
      "both routers to poll every engine while no prefill ended",
    );
    let localDisagreement = 0;
    for (const engine of engines) {
      const fromA = viewA.get(engine.id)!.load;
      const fromB = viewB.get(engine.id)!.load;
      const expectedBasis = engine.flavour === "sglang" ? "engine_tokens" : "engine_counts";
      assertEquals([fromA.basis, fromB.basis], [expectedBasis, expectedBasis], engine.id);
      const gap = Math.abs(fromA.waitingPrefillTokens - fromB.waitingPrefillTokens);
      assert(
        gap <= PROMPT,
        `${engine.id}: A sees ${fromA.waitingPrefillTokens}, B sees ${fromB.waitingPrefillTokens}`,
      );
      localDisagreement += Math.abs(fromA.terms.ourPrefillTokens - fromB.terms.ourPrefillTokens);
    }
    // Their own accounts alone would disagree by at least the 3 requests A sent more.
    assert(localDisagreement >= 3 * PROMPT, `own accounts differ by ${localDisagreement}`);
  } finally {
    await Promise.all(engines.map((e) => e.close())); // ends the queued requests at once
    await Promise.all(requests);
    await Promise.all(routers.map((r) => r.stop()));
    await config.remove();
  }
});

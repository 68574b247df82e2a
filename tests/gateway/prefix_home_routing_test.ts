import { assert, assertEquals } from "../assert.ts";
import { demoChat } from "../../cli/demo.ts";
import { createRouter } from "../../routes/app.ts";
import { startDemoCluster } from "../../src/fakes/demo_cluster.ts";
import { homeOf } from "../../src/scheduling/prefix_home.ts";

/** One chat per document, one at a time, each answered in full before the next. */
async function sendDocuments(port: number, model: string, documents: number): Promise<void> {
  for (let doc = 0; doc < documents; doc++) {
    const body = demoChat(model, doc, "Give me a one-line summary.");
    const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...body, stream: false }),
    });
    assertEquals(response.status, 200, await response.text());
  }
}

// The router looks up a new prompt's home from its own chunk keys (src/gateway/dispatch_plan.ts)
// and the default policy breaks ties by it: documents nobody holds, sent one at a time to an
// idle cluster, each land on their home, and their homes spread over the instances.
Deno.test("the router places new documents on an idle cluster at their homes", async () => {
  const cluster = await startDemoCluster({ engines: 4 });
  const router = await createRouter(cluster.routerConfig(), { log: () => {} });
  try {
    assert(await router.warm(), "worker threads loaded");
    const { port } = await router.serve({ port: 0 });
    await sendDocuments(port, cluster.model, 12);
    const logged = router.decisions.recent(100).reverse();
    assertEquals(logged.length, 12);
    const homes = new Set<string>();
    for (const entry of logged) {
      const { request, candidates } = entry.inputs;
      assert(request.homeKey !== undefined, `request ${entry.requestId} has no home key`);
      const home = homeOf(request.homeKey, candidates)!;
      if (candidates.some((c) => c.localPrefixTokens > 0 || c.waitingPrefillTokens > 0)) continue;
      assertEquals(entry.chosen, home, `request ${entry.requestId}`);
      homes.add(home);
    }
    assert(homes.size >= 3, `12 documents went to ${[...homes].join(", ")}`);
  } finally {
    await router.close();
    await cluster.close();
  }
});

// With the store failing, every prompt looks new: no home, or a shared system prompt would send
// every request to its one home.
Deno.test("the router gives no home while the store's answers are missing", async () => {
  const cluster = await startDemoCluster({ engines: 3 });
  const router = await createRouter(cluster.routerConfig(), { log: () => {} });
  try {
    assert(await router.warm(), "worker threads loaded");
    const { port } = await router.serve({ port: 0 });
    await cluster.master.setMode("http500");
    await sendDocuments(port, cluster.model, 3);
    const logged = router.decisions.recent(100);
    assertEquals(logged.length, 3);
    for (const entry of logged) {
      assert(entry.lookup && entry.lookup.outcome !== "ok", JSON.stringify(entry.lookup));
      assertEquals(entry.inputs.request.homeKey, undefined, `request ${entry.requestId}`);
    }
  } finally {
    await cluster.master.setMode("ok");
    await router.close();
    await cluster.close();
  }
});

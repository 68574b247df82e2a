/**
 * A Mooncake HA group behind the router (kv.url lists the leader and a standby sharing its store)
 * and a leader failover while requests flow: no request fails, and cache-aware routing goes on
 * against the promoted standby (its lookups answer, the held prefix is hit on its instance).
 */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import {
  completion,
  MODEL,
  range,
  startTestCluster,
  type TestCluster,
} from "../support/harness.ts";
import { eventually } from "../support/eventually.ts";

const PROMPT = range(1000, 200); // 12 full chunks of 16: 192 tokens held on e1

interface Answer {
  status: number;
  instance: string | null;
  hitTokens: string | null;
  /** Position of the answer among all answers, so the test can split before / after a step. */
  at: number;
}

/** `workers` loops sending PROMPT one request after another until stopped. */
function flow(t: TestCluster, workers = 2) {
  const answers: Answer[] = [];
  let running = true;
  const loop = async () => {
    while (running) {
      const response = await completion(t.url, { prompt: PROMPT, max_tokens: 2 });
      await response.text();
      answers.push({
        status: response.status,
        instance: response.headers.get("x-tidegate-instance"),
        hitTokens: response.headers.get("x-tidegate-hit-tokens"),
        at: answers.length,
      });
    }
  };
  const loops = Array.from({ length: workers }, loop);
  return {
    answers,
    /** Waits until `n` more answers arrived after now. */
    more: (n: number, what: string) => {
      const from = answers.length;
      return eventually(() => answers.length >= from + n, 10_000, what);
    },
    async stop() {
      running = false;
      await Promise.all(loops);
      return answers;
    },
  };
}

const HA_KV = {
  // Hits must come from the store, not from the router's own recent dispatches.
  predictedIndex: { enabled: false },
  leaderCheckTimeoutMs: 20,
};

function storeUrl(t: TestCluster): string | undefined {
  return t.router.registry.runtime(MODEL)?.store?.url;
}

Deno.test("an HA handover while requests flow: every request succeeds and every lookup hits", async () => {
  const t = await startTestCluster({ standbys: 1, kv: HA_KV });
  const [standby] = t.standbys;
  try {
    t.hold(1, PROMPT, 12);
    const traffic = flow(t);
    await traffic.more(4, "answers from the first leader");
    await standby.promote({ address: "127.0.0.1:50052", viewVersion: 2 });
    await t.master.demote();
    const after = traffic.answers.length;
    await traffic.more(6, "answers after the failover");
    const answers = await traffic.stop();

    assertEquals(answers.filter((a) => a.status !== 200), [], "no request failed");
    for (const answer of answers) {
      assertEquals([answer.instance, answer.hitTokens], ["e1", "192"], `answer ${answer.at}`);
    }
    assert(answers.length > after);
    assertEquals(storeUrl(t), standby.url, "the router follows the promoted standby");
    assert(standby.count >= 6, `the new leader answered lookups (${standby.count})`);
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assertMatch(metrics, /tidegate_store_down\{model="test-model"\} 0/);
    assert(!/outcome="failed"/.test(metrics), "no lookup failed");
  } finally {
    await t.close();
  }
});

Deno.test("an HA failover with a moment without leader: requests go on by load, then hits resume on the new leader", async () => {
  const t = await startTestCluster({ standbys: 1, kv: { ...HA_KV, downWindowMs: 600_000 } });
  const [standby] = t.standbys;
  const store = () => t.router.registry.runtime(MODEL)!.store!;
  try {
    t.hold(1, PROMPT, 12);
    const traffic = flow(t);
    await traffic.more(4, "answers from the first leader");
    await t.master.demote();
    // No master serves: one lookup asks each once, fails, and the store is marked down.
    await eventually(() => store().health.state === "down", 10_000, "the store marked down");
    await traffic.more(4, "answers dispatched by load alone");
    await standby.promote({ address: "127.0.0.1:50052", viewVersion: 2 });
    // A /health sweep finds the new leader and ends the 10-minute down-window at once.
    const promotedAt = traffic.answers.length;
    await eventually(
      () => traffic.answers.some((a) => a.at >= promotedAt && a.hitTokens === "192"),
      10_000,
      "a hit predicted from the new leader's answer",
    );
    await traffic.more(4, "answers after the recovery");
    const answers = await traffic.stop();

    assertEquals(answers.filter((a) => a.status !== 200), [], "no request failed");
    assertEquals(store().url, standby.url);
    assertEquals(store().health.state, "up");
    const last = answers.slice(-3);
    assertEquals(last.map((a) => [a.instance, a.hitTokens]), last.map(() => ["e1", "192"]));
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assertMatch(metrics, /tidegate_store_down\{model="test-model"\} 0/);
    assert(
      t.logs.some((l) => l.message.startsWith("KV store: following another Mooncake master")),
      "the switch is logged",
    );
  } finally {
    await t.close();
  }
});

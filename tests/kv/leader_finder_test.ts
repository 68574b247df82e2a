import { strictEqual } from "node:assert/strict";
import { LeaderFinder } from "../../src/kv/leader_finder.ts";

const LEADER = `{"status":"ok","role":"leader","ha_state":"serving","service_ready":true}`;
const STANDBY = `{"status":"ok","role":"standby","ha_state":"standby","service_ready":false}`;

/** A fetch answering `/health` per host from `bodies`; a host missing there never answers. */
function healthFetch(bodies: Record<string, string>, asked: string[]): typeof fetch {
  return (input, init) => {
    const url = new URL(String(input));
    asked.push(url.host);
    const body = bodies[url.host];
    if (body !== undefined) return Promise.resolve(new Response(body, { status: 200 }));
    return new Promise((_, reject) =>
      init?.signal?.addEventListener("abort", () => reject(new DOMException("aborted")))
    );
  };
}

Deno.test("LeaderFinder reads every master's /health and names the one that serves", async () => {
  const asked: string[] = [];
  let now = 0;
  const finder = new LeaderFinder({
    urls: ["http://a:1", "http://b:1"],
    fetch: healthFetch({ "a:1": STANDBY, "b:1": LEADER }, asked),
    now: () => now,
    timeoutMs: 1_000,
  });
  strictEqual(await finder.find("http://a:1"), "http://b:1");
  strictEqual(asked.sort().join(","), "a:1,b:1");
  strictEqual(await finder.find("http://a:1"), undefined, "too soon after the last sweep");
  strictEqual(finder.sweeps, 1);
  now += 1_000;
  strictEqual(await finder.find("http://a:1"), "http://b:1");
  strictEqual(finder.sweeps, 2);
});

Deno.test("LeaderFinder is bounded by its timeout when a master never answers, one sweep at a time", async () => {
  const finder = new LeaderFinder({
    urls: ["http://hung:1", "http://b:1"],
    fetch: healthFetch({ "b:1": STANDBY }, []),
    now: () => performance.now(),
    timeoutMs: 30,
  });
  const sweep = finder.find("http://hung:1");
  strictEqual(await finder.find("http://hung:1"), undefined, "no second sweep while one runs");
  strictEqual(await sweep, undefined, "nobody serves; the hung master is cut at the timeout");
  strictEqual(finder.sweeps, 1);
});

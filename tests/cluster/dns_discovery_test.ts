import { assert, assertEquals } from "../assert.ts";
import { DnsDiscovery, type ResolveDns, type SrvAnswer } from "../../src/cluster/dns_discovery.ts";
import { DiscoverySchema, type InstanceConfig } from "../../src/config/schema.ts";
import { ManualTime, settle } from "./manual_time.ts";
import { testCluster, testInstance } from "./test_cluster.ts";

type Answers = Record<string, string[] | SrvAnswer[] | Error | "hang">;

/** A resolver answering from a table keyed `TYPE name`; tests edit the table between rounds. */
function fakeResolver(answers: Answers): ResolveDns & { calls: string[] } {
  const calls: string[] = [];
  const resolve = ((query: string, type: string) => {
    calls.push(`${type} ${query}`);
    const answer = answers[`${type} ${query}`];
    if (answer === undefined) return Promise.reject(new Error(`NXDOMAIN ${query}`));
    if (answer === "hang") return new Promise(() => {});
    if (answer instanceof Error) return Promise.reject(answer);
    return Promise.resolve(answer);
  }) as ResolveDns & { calls: string[] };
  resolve.calls = calls;
  return resolve;
}

const entry = (raw: Record<string, unknown>) => DiscoverySchema.parse(raw);

function discovery(
  entries: Record<string, unknown>[],
  resolveDns: ResolveDns,
  time = new ManualTime(),
) {
  const applied: InstanceConfig[][] = [];
  const logs: string[] = [];
  const d = new DnsDiscovery({
    model: "m",
    entries: entries.map(entry),
    apply: (instances) => applied.push(instances),
    resolveDns,
    now: time.now,
    timers: time,
    timeoutMs: 1_000,
    log: (message) => logs.push(message),
  });
  return { d, applied, logs, time };
}

Deno.test("DnsDiscovery turns A records into instances named after the group, address and port", async () => {
  const resolver = fakeResolver({ "A vllm.ns.svc": ["10.0.0.7", "10.0.0.5"] });
  const { d, applied } = discovery([{
    name: "pool",
    hostname: "vllm.ns.svc",
    port: 8000,
    role: "prefill",
    engine: "sglang",
  }], resolver);
  await d.refresh();
  assertEquals(applied.length, 1);
  assertEquals(applied[0], [
    {
      id: "pool-10.0.0.5:8000",
      url: "http://10.0.0.5:8000",
      kvHost: "10.0.0.5",
      role: "prefill",
      engine: "sglang",
    },
    {
      id: "pool-10.0.0.7:8000",
      url: "http://10.0.0.7:8000",
      kvHost: "10.0.0.7",
      role: "prefill",
      engine: "sglang",
    },
  ]);
  await d.refresh();
  assertEquals(applied.length, 1, "an unchanged answer applies nothing");
});

Deno.test("DnsDiscovery resolves SRV targets to addresses, brackets IPv6 and falls back to the target name", async () => {
  const resolver = fakeResolver({
    "SRV _http._tcp.vllm.ns.svc": [
      { target: "pod-a.vllm.ns.svc.", port: 8001, priority: 0, weight: 1 },
      { target: "pod-b.vllm.ns.svc.", port: 8002, priority: 0, weight: 1 },
      { target: "pod-c.vllm.ns.svc.", port: 8003, priority: 0, weight: 1 },
    ],
    "A pod-a.vllm.ns.svc": ["10.1.0.1"],
    "AAAA pod-b.vllm.ns.svc": ["fd00::2"],
  });
  const { d, applied } = discovery([{
    name: "srv",
    hostname: "_http._tcp.vllm.ns.svc",
    recordType: "SRV",
  }], resolver);
  await d.refresh();
  assertEquals(applied[0].map((i) => [i.id, i.url, i.kvHost]), [
    ["srv-10.1.0.1:8001", "http://10.1.0.1:8001", "10.1.0.1"],
    ["srv-fd00::2:8002", "http://[fd00::2]:8002", "fd00::2"],
    ["srv-pod-c.vllm.ns.svc:8003", "http://pod-c.vllm.ns.svc:8003", "pod-c.vllm.ns.svc"],
  ]);
  // Every id is one the config schema would accept.
  for (const instance of applied[0]) assert(/^[A-Za-z0-9][A-Za-z0-9_.:-]*$/.test(instance.id));
});

Deno.test("DnsDiscovery applies the union of a model's entries and keeps a failing entry's last answer", async () => {
  const answers: Answers = { "A a.svc": ["10.0.0.1"], "A b.svc": ["10.0.1.1"] };
  const { d, applied, logs } = discovery([
    { name: "a", hostname: "a.svc", port: 80 },
    { name: "b", hostname: "b.svc", port: 81 },
  ], fakeResolver(answers));
  await d.refresh();
  assertEquals(applied.at(-1)!.map((i) => i.id).sort(), ["a-10.0.0.1:80", "b-10.0.1.1:81"]);

  answers["A b.svc"] = new Error("SERVFAIL");
  answers["A a.svc"] = ["10.0.0.2"];
  await d.refresh();
  await d.refresh();
  assertEquals(applied.at(-1)!.map((i) => i.id).sort(), ["a-10.0.0.2:80", "b-10.0.1.1:81"]);
  assertEquals(
    logs.filter((m) => m.includes("resolution failed")).length,
    1,
    "one log line per outage",
  );
  assertEquals(d.states()[1].consecutiveFailures, 2);
  assertEquals(d.states()[1].lastError, "SERVFAIL");

  answers["A b.svc"] = [];
  await d.refresh();
  assert(logs.includes("discovery: resolution recovered"));
  assertEquals(applied.at(-1)!.map((i) => i.id), ["a-10.0.0.2:80"], "an empty answer is real");
});

Deno.test("DnsDiscovery re-resolves every interval and a vanished address drains out of the cluster", async () => {
  const time = new ManualTime();
  const answers: Answers = { "A pool.svc": ["10.0.0.1", "10.0.0.2"] };
  const cluster = testCluster({
    fetch: () => Promise.reject(new Error("no network in this test")),
    now: time.now,
    timers: time,
  });
  const d = new DnsDiscovery({
    model: "m",
    entries: [entry({ name: "p", hostname: "pool.svc", port: 8000, intervalMs: 500 })],
    apply: (instances) => cluster.reconcileMembers(instances, "discovery"),
    resolveDns: fakeResolver(answers),
    now: time.now,
    timers: time,
  });
  cluster.upsert(testInstance("static", { url: "http://10.9.9.9:1" }), "config");
  d.start();
  await settle();
  assertEquals(cluster.entries().map((e) => e.config.id).sort(), [
    "p-10.0.0.1:8000",
    "p-10.0.0.2:8000",
    "static",
  ]);
  const busy = cluster.begin("p-10.0.0.1:8000"); // a request still running on it

  answers["A pool.svc"] = ["10.0.0.2", "10.0.0.3"];
  await time.advance(499);
  assertEquals(cluster.get("p-10.0.0.3:8000"), undefined, "not before the interval");
  await time.advance(1);
  assert(cluster.get("p-10.0.0.3:8000"));
  const leaving = cluster.get("p-10.0.0.1:8000")!;
  assert(leaving.draining && !cluster.isHealthy(leaving), "drained: no new requests");
  busy();
  assertEquals(cluster.get("p-10.0.0.1:8000"), undefined, "forgotten once idle");
  assert(cluster.get("static"), "other origins are left alone");
  await d.stop();
  assertEquals(time.pendingTimers, 0);
});

Deno.test("DnsDiscovery gives up on a resolver that does not answer within its deadline", async () => {
  const time = new ManualTime();
  const { d, applied, logs } = discovery(
    [{ name: "p", hostname: "slow.svc", port: 80 }],
    fakeResolver({ "A slow.svc": "hang" }),
    time,
  );
  const round = d.refresh();
  await time.advance(1_000);
  await round;
  assertEquals(applied.length, 0);
  assertEquals(d.states()[0].lastError, "DNS resolution timed out after 1000 ms");
  assertEquals(logs.length, 1);
  assertEquals(time.pendingTimers, 0);
});

Deno.test("DnsDiscovery.adopt() keeps unchanged entries' answers and drops those of removed entries", async () => {
  const answers: Answers = { "A a.svc": ["10.0.0.1"], "A b.svc": ["10.0.1.1"] };
  const first = discovery([
    { name: "a", hostname: "a.svc", port: 80 },
    { name: "b", hostname: "b.svc", port: 81 },
  ], fakeResolver(answers));
  await first.d.refresh();

  const applied: string[][] = [];
  const next = new DnsDiscovery({
    model: "m",
    entries: [entry({ name: "a", hostname: "a.svc", port: 80 })],
    apply: (instances) => applied.push(instances.map((i) => i.id)),
    resolveDns: fakeResolver(answers),
    now: () => 0,
  });
  next.adopt(first.d, true);
  assertEquals(applied, [["a-10.0.0.1:80"]], "b's instance leaves at once, a's stays");
  await next.refresh();
  assertEquals(applied.length, 1, "the first round of the new discovery changes nothing");
});

Deno.test("DnsDiscovery applies nothing from a round that answers after stop() (a reload replaced it)", async () => {
  let answer!: (addresses: string[]) => void;
  const resolveDns: ResolveDns = () => new Promise((resolve) => (answer = resolve));
  const { d, applied } = discovery([{ name: "p", hostname: "pool.svc", port: 80 }], resolveDns);
  const round = d.refresh();
  await d.stop();
  answer(["10.0.0.1"]);
  await round;
  assertEquals(applied, [], "the successor's answers must not be overwritten");
});

Deno.test("DnsDiscovery skips addresses outside the allowed hosts, logging and counting each once", async () => {
  const resolver = fakeResolver({ "A vllm.ns.svc": ["10.0.0.5", "192.168.9.9"] });
  const refused: string[] = [];
  const time = new ManualTime();
  const applied: InstanceConfig[][] = [];
  const logs: { message: string; fields?: Record<string, unknown> }[] = [];
  const d = new DnsDiscovery({
    model: "m",
    entries: [entry({ name: "pool", hostname: "vllm.ns.svc", port: 8000 })],
    apply: (instances) => applied.push(instances),
    resolveDns: resolver,
    now: time.now,
    timers: time,
    log: (message, fields) => logs.push({ message, fields }),
    allowsHost: (host) => host.startsWith("10."),
    onRefused: (instance) => refused.push(instance.id),
  });
  await d.refresh();
  await d.refresh();
  assertEquals(applied.map((round) => round.map((i) => i.id)), [["pool-10.0.0.5:8000"]]);
  assertEquals(refused, ["pool-192.168.9.9:8000"], "counted once while it stays in the answer");
  assertEquals(d.states()[0].refused, 1);
  const lines = logs.filter((l) => l.message === "discovery: instance refused");
  assertEquals(lines.length, 1);
  assert(String(lines[0].fields?.reason).includes("192.168.9.9"));
});

Deno.test("DnsDiscovery refuses an SRV target that would put credentials in the URL, without logging them", async () => {
  const resolver = fakeResolver({
    "SRV _http._tcp.vllm": [
      { target: "user:s3cret@evil.example.", port: 8000 },
      { target: "10.0.0.5", port: 8000 },
    ],
  });
  const logs: string[] = [];
  let refused = 0;
  const time = new ManualTime();
  const applied: InstanceConfig[][] = [];
  const d = new DnsDiscovery({
    model: "m",
    entries: [entry({ name: "pool", hostname: "_http._tcp.vllm", recordType: "SRV" })],
    apply: (instances) => applied.push(instances),
    resolveDns: resolver,
    now: time.now,
    timers: time,
    log: (message, fields) => logs.push(`${message} ${JSON.stringify(fields)}`),
    onRefused: () => refused++,
  });
  await d.refresh();
  assertEquals(applied[0].map((i) => i.url), ["http://10.0.0.5:8000"]);
  assertEquals(refused, 1);
  assert(logs.some((line) => line.includes("instance refused")), logs.join("\n"));
  assert(!logs.some((line) => line.includes("s3cret")), logs.join("\n"));
});

Deno.test("DnsDiscovery refuses a record whose id would be no valid instance id (a 300-character SRV target)", async () => {
  const long = `${"a".repeat(60)}.${"b".repeat(60)}.${"c".repeat(60)}.${"d".repeat(60)}.example`;
  const resolver = fakeResolver({
    "SRV _http._tcp.vllm": [{ target: `${long}.`, port: 8000 }, { target: "10.0.0.5", port: 8000 }],
  });
  const { d, applied, logs } = discovery([{
    name: "pool",
    hostname: "_http._tcp.vllm",
    recordType: "SRV",
  }], resolver);
  await d.refresh();
  assertEquals(applied[0].map((i) => i.id), ["pool-10.0.0.5:8000"]);
  assert(logs.includes("discovery: instance refused"), logs.join("\n"));
});

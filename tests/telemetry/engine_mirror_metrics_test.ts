/**
 * The per-instance gauges of the engines' KV event mirrors, through the router's /metrics: an
 * instance with `kvEvents` on a publisher that sends one batch is exact; when the publisher goes
 * away its mirror is untrusted and the lost connection is counted.
 */
import { encode } from "@msgpack/msgpack";
import { assertEquals } from "../assert.ts";
import { eventually } from "../support/eventually.ts";
import { MODEL, startTestCluster } from "../support/harness.ts";
import { greeting, message, readyCommand } from "../../src/kv/events/zmtp_codec.ts";

/** A ZMTP PUB endpoint that greets each subscriber and sends it vLLM's batch seq 0. */
function startPublisher() {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const connections = new Set<Deno.Conn>();
  const seq = new Uint8Array(8);
  const batch = encode([1.5, [{ type: "BlockStored", block_hashes: [7], block_size: 16 }]]);
  const accepting = (async () => {
    for await (const connection of listener) {
      connections.add(connection);
      void (async () => {
        for (
          const bytes of [greeting(), readyCommand("PUB"), message([new Uint8Array(0), seq, batch])]
        ) {
          let written = 0;
          while (written < bytes.length) written += await connection.write(bytes.subarray(written));
        }
        while (await connection.read(new Uint8Array(4096)) !== null) { /* its subscription */ }
      })().catch(() => {}).finally(() => connections.delete(connection));
    }
  })().catch(() => {});
  return {
    endpoint: `tcp://127.0.0.1:${listener.addr.port}`,
    async stop() {
      listener.close();
      for (const connection of connections) connection.close();
      await accepting;
    },
  };
}

function gauge(metrics: string, name: string, instance: string): number | undefined {
  const line = metrics.split("\n").find((l) =>
    l.startsWith(`${name}{model="${MODEL}",instance="${instance}"}`)
  );
  return line === undefined ? undefined : Number(line.split(" ").at(-1));
}

Deno.test("metrics: each engine's KV event mirror, exact or not, and its lost connections", async () => {
  const publisher = startPublisher();
  const cluster = await startTestCluster({
    engines: 2,
    background: true,
    instanceOf: (i) => (i === 0 ? { kvEvents: { endpoint: publisher.endpoint } } : {}),
  });
  const scrape = async () => await (await fetch(`${cluster.url}/metrics`)).text();
  try {
    let metrics = "";
    await eventually(
      async () => {
        metrics = await scrape();
        return gauge(metrics, "tidegate_engine_mirror_exact", "e0") === 1;
      },
      10_000,
      () =>
        `e0's mirror exact:\n${
          metrics.split("\n").filter((l) => l.includes("engine_mirror")).join("\n")
        }`,
    );
    assertEquals(gauge(metrics, "tidegate_engine_mirror_exact", "e1"), undefined, "no kvEvents");
    assertEquals(gauge(metrics, "tidegate_engine_mirror_disconnects", "e0"), 0);
    await publisher.stop();
    await eventually(
      async () => {
        metrics = await scrape();
        return gauge(metrics, "tidegate_engine_mirror_disconnects", "e0") === 1;
      },
      10_000,
      "the lost connection counted",
    );
    assertEquals(gauge(metrics, "tidegate_engine_mirror_exact", "e0"), 0);
    assertEquals(gauge(metrics, "tidegate_engine_mirror_restarts", "e0"), 0);
  } finally {
    await cluster.close();
    await publisher.stop().catch(() => {});
  }
});

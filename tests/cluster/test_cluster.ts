/**
 * A ModelCluster for unit tests: probes every minute (tests probe by hand), answers `{}` to every
 * request unless `fetch` is given; any option can be overridden.
 */
import { ModelCluster, type ModelClusterOptions } from "../../src/cluster/model_cluster.ts";
import type { HealthConfig, InstanceConfig } from "../../src/config/schema.ts";

export const TEST_HEALTH: HealthConfig = {
  intervalMs: 60_000,
  timeoutMs: 100,
  failuresToOpen: 3,
  successesToClose: 2,
  openCooldownMs: 1_000,
};

export function testCluster(options: Partial<ModelClusterOptions> = {}): ModelCluster {
  return new ModelCluster({
    model: "m",
    health: TEST_HEALTH,
    fetch: () => Promise.resolve(new Response("{}")),
    now: () => performance.now(),
    ...options,
  });
}

/** A vLLM instance at `http://{id}:8000`. */
export function testInstance(id: string, extra: Partial<InstanceConfig> = {}): InstanceConfig {
  return { id, url: `http://${id}:8000`, engine: "vllm", role: "neutral", ...extra };
}

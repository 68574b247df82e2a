/**
 * Every manifest in deploy/kubernetes, rendered per overlay, validates against the official
 * Kubernetes JSON schemas (kubernetes-models, generated from the Kubernetes OpenAPI spec, and the
 * prometheus-operator CRD schema for the ServiceMonitor), and the objects agree with each other
 * and with the router's own config loader.
 */
import { assert, assertEquals } from "../assert.ts";
import { parseConfigText } from "../../src/config/load.ts";
import { policyProblems } from "../../src/scheduling/named_policy.ts";
import { ConfigMap, Service } from "kubernetes-models/v1";
import { Deployment } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import type { K8sObject } from "./kustomize.ts";
import { configMount, KUSTOMIZATIONS, only, render } from "./manifests.ts";

// deno-lint-ignore no-explicit-any
type Model = new (data: any) => { validate(): void };

const MODELS: Record<string, Model> = {
  "v1/ConfigMap": ConfigMap,
  "v1/Service": Service,
  "apps/v1/Deployment": Deployment,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor,
};

const SECRET_ENV: Record<string, string> = {
  TIDEGATE_ADMIN_TOKEN: "example-token",
  TIDEGATE_REDIS_URL: "redis://redis.llm.svc:6379",
};

function routerConfig(objects: K8sObject[]) {
  const { configMap, container } = configMount(objects);
  const declared = new Set(container.env.map((e: K8sObject) => e.name));
  const read: string[] = [];
  const env = (name: string) => {
    read.push(name);
    return declared.has(name) ? SECRET_ENV[name] : undefined;
  };
  const text = configMap.data["router.yaml"];
  const config = parseConfigText(text, "router.yaml", { env, baseDir: "/etc/tidegate" });
  return { config, read, declared, text };
}

for (const name of KUSTOMIZATIONS) {
  Deno.test(`${name}: every object validates against the Kubernetes schemas`, async () => {
    const objects = await render(name);
    const kinds = objects.map((o) => o.kind).sort();
    assertEquals(kinds, [
      "ConfigMap",
      "Deployment",
      "HorizontalPodAutoscaler",
      "NetworkPolicy",
      "PodDisruptionBudget",
      "Service",
      "Service",
      "ServiceMonitor",
    ]);
    for (const object of objects) {
      const key = `${object.apiVersion}/${object.kind}`;
      const model = MODELS[key];
      assert(model !== undefined, `no schema for ${key}`);
      try {
        new model(object).validate();
      } catch (error) {
        throw new Error(`${name}: ${key} ${object.metadata.name}: ${(error as Error).message}`);
      }
      assertEquals(object.metadata.namespace, "llm", `${key} ${object.metadata.name}`);
    }
  });

  Deno.test(`${name}: the ConfigMap's router.yaml validates with the router's loader`, async () => {
    const objects = await render(name);
    const { config, read, declared } = routerConfig(objects);
    assertEquals(policyProblems(config), []);
    // Every env:NAME the config reads is set in the container.
    for (const variable of read) assert(declared.has(variable), `${variable} is not set`);
    const { pod, container } = configMount(objects);
    const http = container.ports.find((p: K8sObject) => p.name === "http");
    assertEquals(config.listen.port, http.containerPort);
    assertEquals(config.listen.host, "0.0.0.0");
    // SIGKILL comes after the router's whole drain (readiness delay + in-flight drain).
    const drainMs = config.shutdown.readyDelayMs + config.shutdown.drainTimeoutMs;
    assert(pod.terminationGracePeriodSeconds * 1000 > drainMs);
    assertEquals(pod.terminationGracePeriodSeconds, 45);
    // Tokenizer workers within the CPU limit.
    assert((config.workers ?? 1) <= Number(container.resources.limits.cpu));
  });

  Deno.test(`${name}: the Deployment probes, spreads, drains and reloads`, async () => {
    const objects = await render(name);
    const { deployment, pod, container, mount, volume } = configMount(objects);
    assertEquals(container.command, undefined, "command would replace the image's ENTRYPOINT");
    assertEquals(container.readinessProbe.httpGet, { path: "/readyz", port: "http" });
    assertEquals(container.livenessProbe.httpGet, { path: "/healthz", port: "http" });
    for (const key of ["requests", "limits"]) {
      assert(container.resources[key].cpu && container.resources[key].memory, key);
    }
    const labels = pod.metadata?.labels ?? deployment.spec.template.metadata.labels;
    const matches = (selector: K8sObject) =>
      Object.entries(selector.matchLabels).every(([k, v]) => labels[k] === v);
    assert(matches(deployment.spec.selector));
    const byNode = pod.topologySpreadConstraints.find((c: K8sObject) =>
      c.topologyKey === "kubernetes.io/hostname"
    );
    assertEquals(byNode.whenUnsatisfiable, "DoNotSchedule");
    assert(matches(byNode.labelSelector));
    assert(pod.securityContext.runAsNonRoot);
    // Hot reload needs the whole directory mounted: a subPath mount never sees the swap.
    assertEquals(mount.subPath, undefined);
    assertEquals(volume.configMap.items, undefined);
    // The other objects select these pods.
    assert(matches(only(objects, "PodDisruptionBudget").spec.selector));
    assert(matches(only(objects, "NetworkPolicy").spec.podSelector));
    const service = only(objects, "Service");
    assert(Object.entries(service.spec.selector).every(([k, v]) => labels[k] === v));
    assertEquals(service.spec.ports[0].targetPort, "http");
    const monitor = only(objects, "ServiceMonitor");
    assert(
      Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) =>
        service.metadata.labels[k] === v
      ),
    );
    assertEquals(monitor.spec.endpoints[0].port, "http");
    assertEquals(monitor.spec.endpoints[0].path, "/metrics");
    // The series' `instance` is the engine's (docs/operations.md "Scraping"); the pod is `router`.
    assertEquals(monitor.spec.endpoints[0].honorLabels, true);
    assertEquals(monitor.spec.endpoints[0].relabelings, [
      { sourceLabels: ["__meta_kubernetes_pod_name"], targetLabel: "router" },
    ]);
    const hpa = only(objects, "HorizontalPodAutoscaler");
    assertEquals(hpa.spec.scaleTargetRef, {
      apiVersion: deployment.apiVersion,
      kind: "Deployment",
      name: deployment.metadata.name,
    });
    assert(hpa.spec.minReplicas >= 2, "one replica cannot drain without an outage");
    // The NetworkPolicy lets the pod reach the engines' port the config discovers.
    const { config } = routerConfig(objects);
    const egressPorts = only(objects, "NetworkPolicy").spec.egress.flatMap((rule: K8sObject) =>
      rule.ports.map((p: K8sObject) => p.port)
    );
    for (const entry of config.models[0].discovery) {
      if (entry.port) assert(egressPorts.includes(entry.port), `egress to ${entry.port}`);
    }
    for (const master of [config.models[0].kv.url!].flat()) {
      assert(egressPorts.includes(Number(new URL(master).port)), `egress to ${master}`);
    }
  });
}

Deno.test("the two regions differ in discovery, store and SLOs", async () => {
  const [a, b] = await Promise.all(["overlays/region-a", "overlays/region-b"].map(render));
  const modelA = routerConfig(a).config.models[0];
  const modelB = routerConfig(b).config.models[0];
  assertEquals(modelA.discovery[0].recordType, "A");
  assertEquals(modelB.discovery[0].recordType, "SRV");
  assert(modelA.kv.url !== modelB.kv.url);
  assert(JSON.stringify(modelA.slo) !== JSON.stringify(modelB.slo));
  assertEquals(
    [a, b].map((objects) => only(objects, "Deployment").spec.template.spec.containers[0].image),
    ["registry.example.com/tidegate:0.1.0", "registry.example.com/tidegate:0.1.0"],
  );
  assertEquals(only(a, "HorizontalPodAutoscaler").spec.minReplicas, 3);
  assertEquals(only(a, "Deployment").spec.replicas, 3);
  // The patch added an env var and kept the base's.
  const envA = only(a, "Deployment").spec.template.spec.containers[0].env.map((e: K8sObject) =>
    e.name
  );
  assert(envA.includes("TIDEGATE_REGION") && envA.includes("TIDEGATE_ADMIN_TOKEN"));
});

Deno.test("a manifest error is caught by the schemas", async () => {
  const objects = await render("base");
  const deployment = structuredClone(only(objects, "Deployment"));
  deployment.spec.template.spec.containers[0].resources.limits.cpu = "two";
  let message = "";
  try {
    new Deployment(deployment).validate();
  } catch (error) {
    message = (error as Error).message;
  }
  assert(message.includes("resources/limits/cpu"), message);
});
